//go:build xvfb

// The real-window check (make gui-check, run by make test when xvfb-run
// exists): the app opens a real window under Xvfb on a fresh data folder,
// walks every wizard step with the demo model (machine, model, pack,
// memory, done) and a chat turn, and at every step checks that the window
// is no larger than the screen and every button of the step is inside it,
// saving one screenshot per step. make gui-check runs it at 1024x640 and at
// 1280x800 ($K3_SCREEN), with the screenshots in $K3_GUI_CHECK.
// Built only with -tags xvfb so plain `go test ./...` stays headless.
package gui

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
	"k3/internal/drawings"
	"k3/ui/bridge"
)

var (
	realApp  fyne.App
	u        *appUI
	w        fyne.Window
	setupErr error
	data     string
	// firstFrame is the window's content before the app started (N9)
	firstFrame fyne.CanvasObject
)

// TestMain opens the app's window the way `k3` does, on a fresh data
// folder, and runs the tests beside the Fyne event loop, which must own
// the main thread.
func TestMain(m *testing.M) {
	var err error
	data, err = os.MkdirTemp("", "k3-gui-check")
	if err != nil {
		panic(err)
	}
	// a first start: no preferences, the suggested folders in a new home
	home := filepath.Join(data, "home")
	setupErr = os.MkdirAll(home, 0o755)
	os.Setenv("HOME", home)
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	realApp = app.NewWithID(appID + ".check")
	b := bridge.RealBackends(data)
	s := bridge.DefaultSettings()
	s.MaxTokens = 160 // the trained demo ends its replies by itself within ~80 tokens
	s.Save(realApp.Preferences())
	u, w = newWindow(realApp, b)
	firstFrame = w.Content()
	realApp.Lifecycle().SetOnStarted(func() {
		fitScreen(w)
		u.Start()
	})
	w.Show()
	code := make(chan int, 1)
	go func() {
		c := m.Run()
		code <- c
		fyne.Do(realApp.Quit)
	}()
	realApp.Run()
	c := <-code
	os.RemoveAll(data)
	os.Exit(c)
}

// screen is the Xvfb screen's size from $K3_SCREEN (WxH).
func screen(t *testing.T) fyne.Size {
	var sw, sh float32
	if _, err := fmt.Sscanf(os.Getenv("K3_SCREEN"), "%fx%f", &sw, &sh); err != nil {
		t.Fatalf("K3_SCREEN=%q is not WxH (make gui-check sets it)", os.Getenv("K3_SCREEN"))
	}
	return fyne.NewSize(sw, sh)
}

func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok := false
		fyne.DoAndWait(func() { ok = cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRealWindow(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	scr := screen(t)
	out := os.Getenv("K3_GUI_CHECK")
	if out == "" {
		out = t.TempDir()
	}
	tag := fmt.Sprintf("%.0fx%.0f", scr.Width, scr.Height)
	waitUntil(t, "the window", 20*time.Second, func() bool {
		sz := w.Canvas().Size()
		return sz.Width >= 400 && sz.Height >= 300 && u.wizard != nil
	})
	if firstFrame == nil || findLabel(firstFrame, startingText) == nil {
		t.Error("N9: the first frame does not say the app is starting")
	}
	var wiz *wizard
	fyne.DoAndWait(func() { wiz = u.wizard })
	n := 0
	start := time.Now()
	// check: the window within the screen, every button inside the window,
	// and a screenshot
	check := func(name string) {
		t.Helper()
		n++
		time.Sleep(400 * time.Millisecond) // a frame or two to lay out and draw
		var size fyne.Size
		var scale float32
		var problems []string
		var px image.Point
		var pxOK bool
		var overPlan string
		fyne.DoAndWait(func() {
			size, scale = w.Canvas().Size(), w.Canvas().Scale()
			problems = buttonsOutside(w.Content(), size)
			px, _, pxOK = screenPixels()
			if c := u.Chat; c != nil && c.Gauges.OverPlan.Visible() {
				overPlan = c.Gauges.OverPlan.Text
			}
		})
		if pxOK && (float32(px.X) != scr.Width || float32(px.Y) != scr.Height) {
			t.Logf("%s: GLFW's work area is %v for a %s screen", name, px, tag)
		}
		if size.Width*scale > scr.Width+0.5 || size.Height*scale > scr.Height+0.5 {
			t.Errorf("%s at %s: the window is %.0fx%.0f px, larger than the screen", name, tag, size.Width*scale, size.Height*scale)
		}
		for _, p := range problems {
			t.Errorf("%s at %s: %s", name, tag, p)
		}
		if overPlan != "" { // the demo in this process is within its plan
			t.Errorf("%s at %s: the Engine panel warns %q", name, tag, overPlan)
		}
		file := filepath.Join(out, fmt.Sprintf("%s-%02d-%s.png", tag, n, name))
		if err := saveScreenshot(file); err != nil {
			t.Errorf("%s: screenshot: %v", name, err)
		} else {
			t.Logf("%s at %.1f s: %s (window %.0fx%.0f)", name, time.Since(start).Seconds(), file, size.Width, size.Height)
		}
	}

	// 1 This machine: the quick measurement runs by itself (real disks)
	waitUntil(t, "the machine measurement", 90*time.Second, func() bool { return wiz.Machine.Report != nil || wiz.Machine.Err != nil })
	check("1-machine")
	fyne.DoAndWait(func() { wiz.NextBtn.OnTapped() })

	// 2 The model: the demo
	check("2-model")
	fyne.DoAndWait(func() { wiz.Model.DemoBt.OnTapped() })
	waitUntil(t, "the demo model", 30*time.Second, func() bool {
		return wiz.D.Demo && wiz.Model.Check != nil && !wiz.NextBtn.Disabled()
	})
	check("2-model-demo")
	fyne.DoAndWait(func() { wiz.NextBtn.OnTapped() })

	// 3 Pack the trunk
	waitUntil(t, "the trunk folder check", 10*time.Second, func() bool { return wiz.Pack.checkJob == nil })
	check("3-pack")
	// packed compressed ("Save disk space"): the chat below runs on it
	fyne.DoAndWait(func() { wiz.Pack.Compress.SetChecked(true) })
	check("3-pack-compress")
	fyne.DoAndWait(func() { wiz.Pack.PackBt.OnTapped() })
	waitUntil(t, "packing", 60*time.Second, func() bool { return !wiz.Pack.Packing && wiz.Pack.State.Status == bridge.TrunkPacked })
	fyne.DoAndWait(func() {
		if !wiz.Pack.State.Compressed || !strings.Contains(wiz.Pack.Status.Text, "packed to save disk space") {
			t.Errorf("the demo trunk is not packed compressed: %+v, %q", wiz.Pack.State, wiz.Pack.Status.Text)
		}
	})
	check("3-pack-done")
	fyne.DoAndWait(func() { wiz.NextBtn.OnTapped() })

	// 4 Memory
	waitUntil(t, "the memory plan", 20*time.Second, func() bool { return wiz.Memory.Plan != nil && !wiz.Memory.busy })
	check("4-memory")
	fyne.DoAndWait(func() {
		if wiz.Memory.PlanErr != nil || wiz.NextBtn.Disabled() {
			t.Errorf("the demo's plan is refused: %v (%s)", wiz.Memory.PlanErr, wiz.why.Text)
		}
		wiz.NextBtn.OnTapped()
	})

	// 5 Done, then the chat
	fyne.DoAndWait(func() {
		if !strings.Contains(wiz.Done.Summary.Text, "(packed to save disk space)") {
			t.Errorf("the summary does not say the trunk saves disk space: %q", wiz.Done.Summary.Text)
		}
	})
	check("5-done")
	fyne.DoAndWait(func() { wiz.Done.OpenBt.OnTapped() })
	var v *chatView
	waitUntil(t, "the chat", 10*time.Second, func() bool { v = u.Chat; return v != nil && w.Content() == v.Root })
	check("6-chat")
	fyne.DoAndWait(func() {
		v.Entry.SetText("Tell me a saying about love.")
		v.SendEntry()
	})
	waitUntil(t, "the chat turn", 90*time.Second, func() bool { return !v.Busy })
	var last, notice string
	var msgs int
	fyne.DoAndWait(func() {
		msgs = len(v.History)
		if msgs > 0 {
			m := v.History[msgs-1]
			last = m.Role + ":" + string(m.Cut)
		}
		notice = v.Notice.Text
	})
	if msgs < 2 || last != "assistant:" || notice != "" { // the trained demo ends by itself
		t.Fatalf("the turn did not complete: %d messages, last %q, notice %q", msgs, last, notice)
	}
	// the demo chat is within the plan the gauges show (it was 10-15 MB
	// above it: the plan did not count whole huge pages and the Go heap's
	// swing)
	fyne.DoAndWait(func() {
		g := v.Gauges.G
		t.Logf("gauges after the turn: in use %.1f MB (peak %.1f MB), plan %.1f MB", float64(g.RSS)/1e6, float64(g.PeakRSS)/1e6, float64(g.Budget)/1e6)
		if v.Gauges.OverPlan.Visible() || g.Budget <= 0 || g.PeakRSS > g.Budget {
			t.Errorf("a demo chat above the plan: %q", v.Gauges.OverPlan.Text)
		}
	})
	t.Logf("first start to first reply: %.1f s after the window showed", time.Since(start).Seconds())
	check("7-chat-reply")
	endInView(t, v, "7-chat-reply")

	// edit the question and send it again: the old one stays a version
	// (‹ 1/2 ›) and the engine reuses what it read before the question
	fyne.DoAndWait(func() {
		v.Edit(v.Views[len(v.Views)-2])
		v.Entry.SetText("Tell me a saying about friendship.")
		v.SendEntry()
	})
	waitUntil(t, "the edited turn", 90*time.Second, func() bool { return !v.Busy })
	fyne.DoAndWait(func() {
		n := len(v.Views)
		if n < 2 || v.Views[n-2].navLbl.Text != "2/2" || v.Views[n-2].nav.Hidden || v.Notice.Text != "" {
			t.Errorf("after the edit: %d views, nav %q, notice %q", n, v.Views[max(n-2, 0)].navLbl.Text, v.Notice.Text)
		}
		if n > 0 && v.Views[n-1].statsLbl.Hidden {
			t.Error("the reply shows no numbers")
		}
	})
	check("8-chat-edited")
	endInView(t, v, "8-chat-edited")
	pictureTurn(t, v, check)
	thinkingOffTurn(t, v, check)

	// a conversation with code, a table, numbers under the reply and two
	// versions, as the history file keeps them
	code := "// Saying returns a fortune.\nfunc Saying(n int) string {\n\tif n > 42 {\n\t\treturn \"A journey of a thousand miles\"\n\t}\n\treturn strconv.Itoa(n)\n}"
	h := []chat.Message{
		{Role: "user", Content: "Show me some Go."},
		{Role: "assistant", ReasoningContent: "A small function will do.",
			Content: "Here is a **function**:\n\n```go\n" + code + "\n```\n\n| Size | Layers |\n|---|---|\n| small | 8 |\n| large | 12 |\n",
			Stats:   &chat.ReplyStats{Tokens: 87, FirstTokenSeconds: 1.42, SecondsPerToken: 0.08, ThoughtSeconds: 2.1},
			Versions: &chat.Versions{Shown: 1, Others: [][]chat.Message{{{Role: "assistant", Content: "An older reply.",
				Stats: &chat.ReplyStats{Tokens: 4, FirstTokenSeconds: 0.9, SecondsPerToken: 2.5}}}}}},
	}
	if err := chat.SaveHistory(filepath.Join(u.conversationsDir(), "Code sample"+chat.Ext), h); err != nil {
		t.Fatal(err)
	}
	var copyBt *widget.Button
	fyne.DoAndWait(func() {
		v.reload(v.Title)
		v.Open("Code sample")
		if v.Title != "Code sample" || len(v.Views) != 2 {
			t.Fatalf("the code sample did not open: %q, %d views, notice %q", v.Title, len(v.Views), v.Notice.Text)
		}
		r := v.Views[1]
		if r.navLbl.Text != "2/2" || r.statsLbl.Text != "12.5 tokens/s · 87 tokens · first token after 1.42 s" ||
			r.think.Items[0].Title != "Thought for 2.1 s" {
			t.Errorf("reopened reply: nav %q, stats %q, thinking %q", r.navLbl.Text, r.statsLbl.Text, r.think.Items[0].Title)
		}
		copyBt = findButton(r.body, "Copy")
		if copyBt == nil || findLabel(r.body, "Go") == nil {
			t.Fatal("the code block has no Copy button or no language label")
		}
	})
	time.Sleep(300 * time.Millisecond) // Open scrolls to the end once more after layout
	fyne.DoAndWait(func() { v.scroller.ScrollToTop() })
	check("9-chat-code")
	fyne.DoAndWait(func() { copyBt.OnTapped() })
	var copied, label string
	fyne.DoAndWait(func() { copied, label = realApp.Clipboard().Content(), copyBt.Text })
	if copied != code || label != "Copied" {
		t.Errorf("copy: clipboard %q, button %q", copied, label)
	}
	check("10-chat-copied")
	fyne.DoAndWait(func() {
		v.switchVersion(v.Views[1], -1)
		if r := v.Views[1]; r.Answer != "An older reply." || r.navLbl.Text != "1/2" || r.statsLbl.Text != "2.5 s/token · 4 tokens · first token after 0.90 s" {
			t.Errorf("version 1: %q nav %q stats %q", r.Answer, r.navLbl.Text, r.statsLbl.Text)
		}
	})
	check("11-chat-version-1")

	// G1: Stop while it thinks; the numbers and the "stopped" note go under
	// the thinking text, and the next reply under all of it (G2: its
	// identifiers and arithmetic as written)
	stopper := &thinkUntilStopped{thinking: make(chan struct{})}
	fyne.DoAndWait(func() {
		v.NewConversation()
		v.engine = stopper
		v.Entry.SetText("Why is the sky blue?")
		v.SendEntry()
	})
	<-stopper.thinking
	fyne.DoAndWait(v.Stop)
	waitUntil(t, "the stop", 30*time.Second, func() bool { return !v.Busy })
	check("12-chat-stopped-thinking")
	fyne.DoAndWait(func() {
		v.engine = &fakeChat{reply: []string{"Call my_long_name(2*3*4) and get_weather; keep [in brackets] and a_b_c as written."}, ownRSS: true}
		v.Entry.SetText("And in code words?")
		v.SendEntry()
	})
	waitUntil(t, "the identifiers reply", 30*time.Second, func() bool { return !v.Busy })
	time.Sleep(300 * time.Millisecond) // a frame or two
	fyne.DoAndWait(func() {
		if o := overlaps(v); len(o) > 0 {
			t.Errorf("messages drawn over each other: %v", o)
		}
		r := v.Views[len(v.Views)-1]
		if rt, ok := r.body.Objects[0].(*widget.RichText); !ok || !strings.Contains(rt.String(), "my_long_name(2*3*4) and get_weather; keep [in brackets]") {
			t.Errorf("the identifiers reply reads %v", r.body.Objects[0])
		}
	})
	check("13-chat-identifiers")
	endInView(t, v, "13-chat-identifiers")

	// the model picker: the demo (with its draft model) and the box that
	// turns the draft model off; the list open
	fyne.DoAndWait(func() {
		v.engine = nil
		// a server used before is offered too (remembered, not asked)
		bridge.RememberServer(u.App.Preferences(), bridge.Settings{Backend: bridge.BackendServer,
			ServerURL: "http://gpu-box:8000/v1", ServerModel: "moonshotai/Kimi-K3"})
		v.Picker.Refresh()
		if !v.Picker.Draft.Visible() || !strings.Contains(v.Picker.Select.Selected, "DEMO model") {
			t.Errorf("picker: %q, draft box shown %v", v.Picker.Select.Selected, v.Picker.Draft.Visible())
		}
	})
	check("14-chat-picker")
	fyne.DoAndWait(func() { v.Picker.Select.Tapped(&fyne.PointEvent{}) })
	check("15-chat-picker-open")
	// the conversation's settings, answers as JSON
	fyne.DoAndWait(func() {
		if top := w.Canvas().Overlays().Top(); top != nil {
			w.Canvas().Overlays().Remove(top)
		}
		v.showChatSettings()
		v.settings.Answers.SetSelected(answersJSON)
	})
	check("16-chat-settings")
	closeOverlay()
	// issue 41's walk: a second model, Stop while it reads a long prompt,
	// a server that is down (window_walk_xvfb_test.go)
	gate := secondModelWalk(t, v, check)
	stopWhileReadingWalk(t, v, gate, check)
	serverDownWalk(t, v, check)
	fyne.DoAndWait(func() {
		v.Shutdown()
		w.Close()
	})
}

// endInView checks that the view ends at the last reply's last line and
// its numbers (G6: the view stopped short of the end after a reply), in
// the real window after its frames.
// pictureTurn attaches a held-out drawing (internal/drawings) to "What is in
// this picture?" in a new conversation, as the Picture… button does, and
// checks that the demo's reply names its colour and shape (issue 40's
// screenshot of a reply about an attached picture).
func pictureTurn(t *testing.T, v *chatView, check func(string)) {
	t.Helper()
	p := drawings.HeldOut(1, 42)[0]
	fyne.DoAndWait(func() {
		v.NewConversation()
		v.attachPicture(bytes.NewReader(p.PNG))
		v.Entry.SetText("What is in this picture?")
		v.SendEntry()
	})
	waitUntil(t, "the picture turn", 90*time.Second, func() bool { return !v.Busy })
	var answer, notice string
	fyne.DoAndWait(func() {
		if n := len(v.History); n > 0 {
			answer = v.History[n-1].Content
		}
		notice = v.Notice.Text
	})
	if !strings.Contains(strings.ToLower(answer), p.Label()) || notice != "" {
		t.Errorf("the reply about a %s: %q (notice %q)", p.Label(), answer, notice)
	}
	check("8-chat-picture")
	endInView(t, v, "8-chat-picture")
}

// thinkingOffTurn asks the demo for a saying with Thinking unticked, in a
// new conversation: the answer comes at once, with no thought glued to it
// (G28), and no note. Thinking is ticked again after.
func thinkingOffTurn(t *testing.T, v *chatView, check func(string)) {
	t.Helper()
	fyne.DoAndWait(func() {
		v.NewConversation()
		v.Thinking.SetChecked(false)
		v.Entry.SetText("Tell me a saying about work.")
		v.SendEntry()
	})
	waitUntil(t, "the thinking-off turn", 90*time.Second, func() bool { return !v.Busy })
	var m chat.Message
	var notice string
	fyne.DoAndWait(func() {
		if n := len(v.History); n > 0 {
			m = v.History[n-1]
		}
		notice = v.Notice.Text
	})
	if m.Role != "assistant" || m.Content == "" || m.ReasoningContent != "" || notice != "" ||
		strings.Contains(m.Content, "The user") || strings.Contains(m.Content, "saying about") {
		t.Errorf("thinking off: %q / %q (notice %q)", m.ReasoningContent, m.Content, notice)
	}
	check("8-chat-thinking-off")
	fyne.DoAndWait(func() { v.Thinking.SetChecked(true) })
}

func endInView(t *testing.T, v *chatView, name string) {
	t.Helper()
	fyne.DoAndWait(func() {
		last := v.Views[len(v.Views)-1]
		d := fyne.CurrentApp().Driver()
		bottom := d.AbsolutePositionForObject(last.statsLbl).Y + last.statsLbl.Size().Height
		if !last.statsLbl.Visible() {
			bottom = d.AbsolutePositionForObject(last.Root).Y + last.Root.Size().Height
		}
		edge := d.AbsolutePositionForObject(v.scroller).Y + v.scroller.Size().Height
		if bottom > edge+1 {
			t.Errorf("%s: the reply's last line ends %.0f px below the edge of the view", name, bottom-edge)
		}
	})
}

// saveScreenshot writes the window as a PNG: the X screen's copy (xwd), or
// the GL front buffer, whichever is not blank. Mesa's software renderer
// under Xvfb often leaves the front buffer black or one colour.
func saveScreenshot(file string) error {
	var img image.Image
	best := 0
	for i := 0; i < 20 && best < 8; i++ {
		fyne.DoAndWait(func() { w.Content().Refresh() })
		time.Sleep(250 * time.Millisecond)
		if x, err := xwdRoot(); err == nil {
			if c := colours(x); c > best {
				img, best = x, c
			}
		}
		var c image.Image
		fyne.DoAndWait(func() { c = w.Canvas().Capture() })
		if c != nil {
			if n := colours(c); n > best {
				img, best = c, n
			}
		}
	}
	if img == nil {
		return fmt.Errorf("no screenshot")
	}
	if best < 8 {
		defer func() { os.Rename(file, file+".blank.png") }()
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if best < 8 {
		return fmt.Errorf("the window looks blank (%d colours, kept as %s.blank.png)", best, file)
	}
	return nil
}

// colours counts the distinct colours on a 7-pixel grid.
func colours(img image.Image) int {
	seen := map[[3]uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 7 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	return len(seen)
}

// xwdRoot captures the X screen with xwd and decodes its ZPixmap output
// (TrueColor in 3- or 4-byte pixels, as Xvfb writes them).
func xwdRoot() (image.Image, error) {
	out, err := exec.Command("xwd", "-root", "-silent").Output()
	if err != nil {
		return nil, err
	}
	if len(out) < 100 {
		return nil, fmt.Errorf("xwd: short output")
	}
	h := make([]uint32, 25)
	for i := range h {
		h[i] = binary.BigEndian.Uint32(out[i*4:])
	}
	width, height, bpp, bpl, ncolors := int(h[4]), int(h[5]), int(h[11]), int(h[12]), int(h[19])
	if h[2] != 2 || (bpp != 32 && bpp != 24) || bpl < bpp/8*width {
		return nil, fmt.Errorf("xwd: format %d, %d bits per pixel in %d bytes a line not handled", h[2], bpp, bpl)
	}
	px := bpp / 8
	off := int(h[0]) + 12*ncolors
	if off+height*bpl > len(out) {
		return nil, fmt.Errorf("xwd: truncated")
	}
	lsb := h[7] == 0
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			p := out[off+y*bpl+px*x:]
			switch {
			case lsb:
				img.SetRGBA(x, y, color.RGBA{p[2], p[1], p[0], 255})
			case px == 4:
				img.SetRGBA(x, y, color.RGBA{p[1], p[2], p[3], 255})
			default:
				img.SetRGBA(x, y, color.RGBA{p[0], p[1], p[2], 255})
			}
		}
	}
	return img, nil
}
