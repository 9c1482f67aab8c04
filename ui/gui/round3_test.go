package gui

import (
	"context"
	"fmt"
	"image/color"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/storage/verify"
	"k3/ui/bridge"
)

// segText is what the segments show, rows separated by "\n" (a list
// item's paragraph is one row).
func segText(segs []widget.RichTextSegment) string {
	var b strings.Builder
	var walk func(segs []widget.RichTextSegment)
	walk = func(segs []widget.RichTextSegment) {
		for _, s := range segs {
			switch t := s.(type) {
			case *widget.ParagraphSegment:
				walk(t.Texts)
				b.WriteString("\n")
			case *widget.TextSegment:
				b.WriteString(t.Text)
				if !t.Inline() {
					b.WriteString("\n")
				}
			case *widget.HyperlinkSegment:
				b.WriteString(t.Text)
			}
		}
	}
	walk(segs)
	return b.String()
}

// G2: identifiers, brackets and arithmetic in a reply's prose read as
// written; emphasis still works where CommonMark puts it.
func TestMarkdownKeepsIdentifiersAndArithmetic(t *testing.T) {
	for md, want := range map[string]string{
		"Call my_long_name and a_b_c now.":             "Call my_long_name and a_b_c now.\n",
		"It is 2*3*4 = 24, and x*y too.":               "It is 2*3*4 = 24, and x*y too.\n",
		"Keep [in brackets] and get_weather(city).":    "Keep [in brackets] and get_weather(city).\n",
		"A List<int> & more\nnext line":                "A List<int> & more next line\n",
		"Use `snake_case` for a__b__c files.":          "Use snake_case for a__b__c files.\n",
		"- first_item\n- second *one*\n  1. inner_x\n": "• first_item\n• second one\n    1. inner_x\n",
		"Escaped \\*star\\* stays.":                    "Escaped *star* stays.\n",
	} {
		assert.Equal(t, want, segText(markdownSegments(md)), "%q", md)
	}

	segs := markdownSegments("a **bold** and *it* and _em_ word")
	var styles []string
	for _, s := range segs {
		if ts, ok := s.(*widget.TextSegment); ok && ts.Text != "" {
			st := ""
			if ts.Style.TextStyle.Bold {
				st = "b:"
			}
			if ts.Style.TextStyle.Italic {
				st = "i:"
			}
			styles = append(styles, st+ts.Text)
		}
	}
	assert.Equal(t, []string{"a ", "b:bold", " and ", "i:it", " and ", "i:em", " word"}, styles)
}

// G2 in the message view: the reply's text block shows the identifiers
// as written (Fyne's Markdown renderer put spaces after every piece).
func TestReplyShowsIdentifiersAsWritten(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant", Content: "Set my_long_name to 2*3*4 and call get_weather."}, &copied)
	require.Len(t, v.body.Objects, 1)
	rt, ok := v.body.Objects[0].(*widget.RichText)
	require.True(t, ok)
	assert.Equal(t, "Set my_long_name to 2*3*4 and call get_weather.", strings.TrimSpace(rt.String()))
}

// closedURL is a loopback address nothing listens on (a listener opened
// and closed again).
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr + "/v1"
}

// G4: a server nobody answers at gets server advice with its address and
// the error, not download advice ("press Resume"), in the server dialog
// and in the chat.
func TestUnreachableServerIsExplainedAsAServer(t *testing.T) {
	url := closedURL(t)
	test.NewTempApp(t)
	f := NewBackendForm(bridge.DefaultSettings(), func(fn func()) { ui(fn) })
	ui(func() {
		f.Where.SetSelected(choiceServer)
		f.URL.SetText(url)
		test.Tap(f.Find)
	})
	waitFor(t, "the answer", func() bool { return f.Find.Disabled() == false && strings.HasPrefix(f.Status.Text, "Cannot") })
	ui(func() {
		assert.Contains(t, f.Status.Text, "Cannot reach the server at "+url+" (")
		assert.Contains(t, f.Status.Text, "connection refused")
		assert.Contains(t, f.Status.Text, "Is the server running?")
		assert.NotContains(t, f.Status.Text, "Resume")
		assert.NotContains(t, f.Status.Text, "download")
	})

	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.Backend, u.S.ServerURL = bridge.BackendServer, url
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() { v.Send("Hello?") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Contains(t, v.Notice.Text, "Cannot reach the server at "+url)
		assert.NotContains(t, v.Notice.Text, "Resume")
	})
}

// relayout lays the window out again from the top, as the desktop driver
// does when a minimum size changed.
func relayout(w fyne.Window) {
	s := w.Canvas().Size()
	w.Resize(s.AddWidthHeight(1, 1))
	w.Resize(s)
}

// G3: the Engine panel keeps its width whatever it shows, so Send and Stop
// stay where they are.
func TestEnginePanelWidthIsFixed(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	d := fyne.CurrentApp().Driver()
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 600))
		relayout(u.Win)
	})
	var send, stop fyne.Position
	var panel float32
	ui(func() {
		send, stop = d.AbsolutePositionForObject(v.SendBt), d.AbsolutePositionForObject(v.StopBt)
		panel = v.GaugesPanel.Size().Width
		assert.Equal(t, float32(gaugesWidth), panel)
		v.Gauges.SetModel(bridge.ModelInfo{Name: "a-model-with-a-very-long-name-that-goes-on-and-on on 127.0.0.1:18430", Layers: 61})
		v.Gauges.Set(bridge.Gauges{Tokens: 123456, SecPerToken: 0.000123, LastToken: 0.0000031, TTFT: 12.5, TrunkMBps: 123456, ExpertMBps: 654321,
			RSS: 123e9, PeakRSS: 124e9, Budget: 100e9, Available: 200e9, Drafted: 123456, Accepted: 65432})
		relayout(u.Win)
		assert.Equal(t, panel, v.GaugesPanel.Size().Width, "the panel changed width")
		assert.Equal(t, send, d.AbsolutePositionForObject(v.SendBt), "Send moved")
		assert.Equal(t, stop, d.AbsolutePositionForObject(v.StopBt), "Stop moved")
	})
}

// thinkUntilStopped streams a long thinking text, then waits for Stop and
// ends the turn stopped, with no answer.
type thinkUntilStopped struct {
	fakeChat
	thinking chan struct{} // closed once the thinking is sent
}

func (f *thinkUntilStopped) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	think := strings.Repeat("I should weigh the question from several sides before I answer it. ", 30)
	on(engine.Event{Kind: engine.EventPhase, Text: "thinking"})
	words := strings.SplitAfter(think, ". ")
	for _, w := range words {
		on(engine.Event{Kind: engine.EventReasoning, Text: w})
		on(engine.Event{Kind: engine.EventToken, Seconds: 0.1})
	}
	close(f.thinking)
	<-ctx.Done()
	return bridge.Reply{Message: chat.Message{Role: "assistant", ReasoningContent: think, Cut: chat.CutStopped, Stats: fakeStats(len(words), 0.1, 0)}}, nil
}

// overlaps lists the messages whose parts are drawn over each other: a
// part laid out shorter than it needs, a part that starts above the end of
// the one before it, a message that starts above the end of the one before.
func overlaps(v *chatView) []string {
	var out []string
	var prevEnd float32
	for i, mv := range v.Views {
		r := mv.Root
		if r.Position().Y < prevEnd-0.5 {
			out = append(out, fmt.Sprintf("message %d starts at %.0f, above the end of message %d (%.0f)", i, r.Position().Y, i-1, prevEnd))
		}
		if r.Size().Height < r.MinSize().Height-0.5 {
			out = append(out, fmt.Sprintf("message %d is %.0f high but needs %.0f", i, r.Size().Height, r.MinSize().Height))
		}
		prevEnd = r.Position().Y + r.Size().Height
		var end float32
		for j, o := range r.Objects {
			if !o.Visible() {
				continue
			}
			if o.Position().Y < end-0.5 {
				out = append(out, fmt.Sprintf("message %d: part %d starts at %.0f, above the end of the part before (%.0f)", i, j, o.Position().Y, end))
			}
			if o.Size().Height < o.MinSize().Height-0.5 {
				out = append(out, fmt.Sprintf("message %d: part %d is %.0f high but needs %.0f", i, j, o.Size().Height, o.MinSize().Height))
			}
			end = o.Position().Y + o.Size().Height
		}
	}
	return out
}

// G1: after Stop during thinking, the reply's numbers and its "stopped"
// note are laid out under the thinking text, and the next messages under
// the reply.
func TestStopDuringThinkingLaysOutUnderTheThinking(t *testing.T) {
	fc := &thinkUntilStopped{thinking: make(chan struct{})}
	a := test.NewTempApp(t)
	u := newTestUIOn(t, a, nil)
	u.B.NewChat = func(bridge.Settings) (bridge.ChatEngine, error) { return fc, nil }
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 600))
		v.Send("Why is the sky blue?")
	})
	<-fc.thinking
	ui(v.Stop)
	waitFor(t, "the stop", func() bool { return !v.Busy })
	ui(func() {
		reply := v.Views[len(v.Views)-1]
		require.True(t, reply.cutLbl.Visible())
		assert.Equal(t, "(stopped — the partial reply is kept)", reply.cutLbl.Text)
		require.True(t, reply.statsLbl.Visible(), "the reply's numbers are shown")
		assert.True(t, reply.think.Visible())
		assert.Contains(t, reply.think.Items[0].Title, "Thought for")
		assert.Empty(t, overlaps(v))
		thinkEnd := reply.think.Position().Y + reply.think.Size().Height
		assert.GreaterOrEqual(t, reply.statsLbl.Position().Y, thinkEnd, "the numbers are drawn over the thinking")
	})
}

// G18: the app keeps the server's API key out of its preferences: in a
// file only the user can read where no keychain runs (as here), and moves
// a key an older k3 left in the preferences.
func TestServerKeyKeptOutOfThePreferences(t *testing.T) {
	a := test.NewTempApp(t)
	a.Preferences().SetString("server.key", "sk-old") // an older k3 wrote it here
	u := newTestUIOn(t, a, nil)
	assert.Equal(t, "sk-old", u.S.ServerKey)
	assert.Equal(t, "", a.Preferences().String("server.key"), "the plain-text key stays in the preferences")

	u.S.Backend, u.S.ServerURL, u.S.ServerKey = bridge.BackendServer, "http://h/v1", "sk-new"
	require.NoError(t, u.SaveSettings())
	assert.Equal(t, "", a.Preferences().String("server.key"))
	fi, err := os.Stat(filepath.Join(u.B.DataDir, "secrets", bridge.ServerKeyFor("http://h/v1")))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// the next start reads it back
	w := test.NewTempWindow(t, nil)
	u2 := newAppUI(a, w, u.B)
	assert.Equal(t, "sk-new", u2.S.ServerKey)
}

// G17: the app's Verify says what `k3 verify` says about the same folder
// (one function, verify.CheckFolder): a shard whose header has damaged
// bytes is named, and a complete folder is not called "right" beyond what
// was checked.
func TestAppVerifySaysWhatTheCLISays(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.B.Verifier = bridge.RealBackends(u.B.DataDir).Verifier
	dir := filepath.Join(t.TempDir(), "flip")
	require.NoError(t, writeSmallModel(dir))
	require.NoError(t, unmarkDemo(dir))
	shard := filepath.Join(dir, "model-00002-of-00009.safetensors")
	b, err := os.ReadFile(shard)
	require.NoError(t, err)
	i := strings.Index(string(b), `"dtype"`)
	require.Positive(t, i)
	copy(b[i:], `"dtypo"`) // damaged bytes in the header
	require.NoError(t, os.WriteFile(shard, b, 0o644))

	cli, err := verify.CheckFolder(t.Context(), dir, verify.Options{})
	require.NoError(t, err)
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil })
	ui(func() { test.Tap(w.Model.VerifyBt) })
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		assert.Equal(t, cli.Files, w.Model.Verified.Files, "the app and k3 verify disagree")
		assert.False(t, w.Model.Verified.Complete)
		assert.Equal(t, 1, w.Model.Verified.Unreadable)
		assert.Contains(t, w.Model.VfStatus.Text, "1 unreadable")
	})

	// a good folder: what was checked, not "right"
	good := filepath.Join(t.TempDir(), "good")
	require.NoError(t, writeSmallModel(good))
	require.NoError(t, unmarkDemo(good))
	ui(func() { w.Model.Dir.SetText(good) })
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.Model.Check.Dir == good })
	ui(func() {
		assert.Equal(t, "", w.Model.VfStatus.Text, "the other folder's result stays")
		test.Tap(w.Model.VerifyBt)
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		assert.True(t, w.Model.Verified.Complete)
		assert.Contains(t, w.Model.VfStatus.Text, "of the right size, and k3 reads every header")
		assert.Contains(t, w.Model.VfStatus.Text, "not compared with checksums")
	})
}

// G7, G16, G29: after New the cursor is in the message box; Delete during
// a reply says why before asking; Export is off on an empty conversation;
// G24: a stop before any text says so.
func TestChatSmallDefects(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.True(t, v.ExportBt.Disabled(), "Export on an empty conversation")
		u.Win.Canvas().Unfocus()
		test.Tap(v.Convs.NewBt)
		assert.Equal(t, v.Entry, u.Win.Canvas().Focused(), "the message box has no focus after New")
		v.Send("hello")
		require.True(t, v.Busy)
		v.Convs.Selected = v.Title
		test.Tap(v.Convs.DeleteBt)
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top)
		assert.NotNil(t, findLabelIn(top, "A reply is being written: wait for it (or press Stop), then delete."), "no reason given before asking")
		u.Win.Canvas().Overlays().Remove(top)
		v.Stop()
	})
	waitFor(t, "stop", func() bool { return !v.Busy })
	ui(func() {
		reply := v.Views[len(v.Views)-1]
		assert.Equal(t, "(stopped — the partial reply is kept)", reply.cutLbl.Text, "it thought before the stop")
		assert.False(t, v.ExportBt.Disabled())
	})
	mv := newMessageView(chat.Message{Role: "assistant", Cut: chat.CutStopped}, messageEnv{})
	assert.Equal(t, "(stopped before anything was written)", mv.cutLbl.Text)
}

// findLabelIn finds a label or rich text showing text under o.
func findLabelIn(o fyne.CanvasObject, text string) fyne.CanvasObject {
	var found fyne.CanvasObject
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if found != nil || o == nil {
			return
		}
		switch t := o.(type) {
		case *widget.Label:
			if strings.Contains(t.Text, text) {
				found = t
			}
		case *widget.RichText:
			if strings.Contains(t.String(), text) {
				found = t
			}
		case *fyne.Container:
			for _, c := range t.Objects {
				walk(c)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(t).Objects() {
				walk(c)
			}
		}
	}
	walk(o)
	return found
}

// Help → About names the version and the data folder; View sets the theme
// (kept) and hides the Engine panel, the chat column taking its room.
func TestHelpThemeAndEnginePanel(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		var menus []string
		for _, m := range u.menu().Items {
			menus = append(menus, m.Label)
		}
		assert.Equal(t, []string{"k3", "Conversation", "View", "Help"}, menus)
		assert.Contains(t, u.aboutText(), "k3 "+Version)
		assert.Contains(t, u.aboutText(), u.B.DataDir)

		u.SetTheme(themeLight)
		light := theme.DefaultTheme().Color(theme.ColorNameBackground, theme.VariantLight)
		assert.Equal(t, light, a.Settings().Theme().Color(theme.ColorNameBackground, theme.VariantDark))
		assert.Equal(t, themeLight, a.Preferences().String(kTheme))

		relayout(u.Win)
		before := v.scroller.Size().Width
		u.SetGaugesShown(false)
		relayout(u.Win)
		assert.False(t, v.GaugesPanel.Visible())
		assert.Greater(t, v.scroller.Size().Width, before+float32(gaugesWidth)-1, "the chat column did not take the room")
		assert.True(t, a.Preferences().Bool(kGauges), "the choice is not kept")
	})
}

// Item 2: on a slow machine the chat says, before sending, how long the
// first token and 100 tokens take at the measured speed; the reply cap is
// always in view.
func TestChatShowsTheWaitToPlanWith(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.Equal(t, fmt.Sprintf("replies up to %d tokens", v.Opts.MaxTokens), v.CapLb.Text)
		assert.False(t, v.Estimate.Visible(), "an estimate before anything was measured")
		v.Gauges.Set(bridge.Gauges{Tokens: 20, SecPerToken: 36, TTFT: 120})
		v.refreshButtons()
		assert.True(t, v.Estimate.Visible())
		assert.Equal(t, bridge.Estimate(36, 120, v.Opts.MaxTokens), v.Estimate.Text)
		assert.Contains(t, v.Estimate.Text, "the first token after about 2 min, then about 1 h per 100 tokens")
		v.Gauges.Set(bridge.Gauges{Tokens: 20, SecPerToken: 0.1, TTFT: 1})
		v.refreshButtons()
		assert.False(t, v.Estimate.Visible(), "an estimate for a fast machine")
	})
}

// G8: Tab leaves the message box, Ctrl+N starts a conversation, Ctrl+F
// goes to the search, Esc closes a dialog open during a reply instead of
// stopping the reply.
func TestChatKeyboard(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		c := u.Win.Canvas()
		c.Focus(v.Entry)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyTab})
		assert.NotEqual(t, v.Entry, c.Focused(), "Tab stayed in the message box")
		assert.NotContains(t, v.Entry.Text, "\t")

		v.Title = "Some saved conversation" // Ctrl+N on a new, empty one keeps it (N3)
		v.Entry.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault})
		assert.NotEqual(t, "Some saved conversation", v.Title, "Ctrl+N did not start a conversation")
		assert.Equal(t, "", v.Entry.Text)
		v.Entry.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault})
		assert.Equal(t, v.Convs.Query, c.Focused(), "Ctrl+F did not go to the search")

		v.Send("hello")
		require.True(t, v.Busy)
		v.showChatSettings()
		require.NotNil(t, c.Overlays().Top())
		c.Focus(v.Entry)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		assert.Nil(t, c.Overlays().Top(), "Esc did not close the dialog")
		assert.True(t, v.Busy, "Esc stopped the reply behind the dialog")
		assert.False(t, v.stopping)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		assert.True(t, v.stopping, "Esc with no dialog stops")
	})
	waitFor(t, "stop", func() bool { return !v.Busy })
}

// G11: the sampling fields are off while greedy decoding is on. G21: a
// search with no match says so. G12: a server's model has no "0 layers".
// G22: nothing measured reads "—", not "0.00 B".
func TestMinorChatDefects(t *testing.T) {
	test.NewTempApp(t)
	o := bridge.DefaultSettings().ConvDefaults()
	o.Greedy = true
	f := newSettingsForm("", o)
	assert.True(t, f.Temperature.Disabled())
	assert.True(t, f.TopP.Disabled())
	f.Greedy.SetChecked(false)
	assert.False(t, f.Temperature.Disabled())
	assert.False(t, f.TopK.Disabled())

	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.False(t, v.Convs.NoMatch.Visible())
		v.Convs.Query.SetText("zzzz")
		assert.Empty(t, v.Convs.Shown())
		assert.True(t, v.Convs.NoMatch.Visible(), "an empty search result does not say so")
		v.Convs.Query.SetText("")
		assert.False(t, v.Convs.NoMatch.Visible())

		v.Gauges.SetModel(bridge.ModelInfo{Name: "demo-model on 127.0.0.1:18430", Remote: true})
		assert.Equal(t, "demo-model on 127.0.0.1:18430", v.Gauges.Model.Text)
		v.Gauges.Set(bridge.Gauges{})
		assert.Equal(t, "in use — (peak —)\nplan —, available —", v.Gauges.MemText.Text)
	})
}

// Item 3: the chat header names the model and its state, and switches
// between the models the app knows (this machine's folder, the server)
// without the wizard.
func TestModelPicker(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = filepath.Join(t.TempDir(), "kimi-k3")
	u.S.TrunkDir = filepath.Join(t.TempDir(), "k3-trunk")
	u.S.ServerURL, u.S.ServerModel = "http://gpu-box:8000/v1", "moonshotai/Kimi-K3"
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	p := v.Picker
	ui(func() {
		assert.Equal(t, []string{"kimi-k3 — on this machine (trunk k3-trunk) · loads with the first message",
			"moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message"}, p.Select.Options)
		assert.Equal(t, "kimi-k3 — on this machine · loads with the first message", pickerShows(p), "the box leaves the trunk to the list")
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "kimi-k3 — on this machine · loaded", pickerShows(p))
		p.Select.SetSelected("moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message")
		assert.Equal(t, bridge.BackendServer, u.S.Backend)
		assert.Equal(t, bridge.BackendServer, bridge.LoadSettings(u.App.Preferences()).Backend, "the switch is not kept")
		assert.Nil(t, v.Info, "the old engine stays in use")
		assert.Equal(t, "moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message", pickerShows(p))
		assert.Len(t, v.History, 2, "the conversation goes on")
	})
}

// G9: a preset larger than the machine stays that preset (not "custom")
// and says what it needs against what the machine has.
func TestPresetLargerThanTheMachine(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.D.ModelDir = u.S.ModelDir
		w.Go(3)
		w.Memory.Preset.SetSelected("max") // 110 + 109 GB on a 32 GB machine
	})
	waitFor(t, "plan", func() bool { return !w.Memory.busy })
	ui(func() {
		assert.Equal(t, "max", w.Memory.Preset.Selected, "the preset turned into custom")
		assert.Equal(t, "max", w.D.Preset)
		assert.Contains(t, w.Memory.PresetNote.Text, presetNotes["max"])
		assert.Contains(t, w.Memory.PresetNote.Text, "This preset needs about 219 GB for the trunk and the expert cache alone; this machine has 32 GB.")
	})
}

// G10: the app's own folder (where the demo model lives) is not suggested
// for the trunk when another disk path has room, even when it measured a
// little faster; it still is when nothing else has room.
func TestSuggestTrunkDirAvoidsTheAppFolder(t *testing.T) {
	fast, slow := 4.76, 4.5
	r := &doctor.Report{Disks: []doctor.DiskResult{
		{Path: "/home/me/.config/k3/demo-model", FreeBytes: 100e9, SeqGBps: &fast},
		{Path: "/home/me", FreeBytes: 100e9, SeqGBps: &slow},
	}}
	d, why := suggestTrunkDir(r, 1e9, "/m/K3", "/home/me/.config/k3")
	assert.Equal(t, bridge.DefaultTrunkDir("/home/me", "/m/K3"), d)
	assert.Contains(t, why, "the disk of /home/me streams")
	r.Disks[1].FreeBytes = 0
	d, _ = suggestTrunkDir(r, 1e9, "/m/K3", "/home/me/.config/k3")
	assert.Equal(t, bridge.DefaultTrunkDir("/home/me/.config/k3/demo-model", "/m/K3"), d)
}

// G25: in server mode "Start serving" is off (the status says why).
func TestServeOffInServerMode(t *testing.T) {
	u, _ := newTestUI(t, nil)
	u.S.Backend, u.S.ServerURL = bridge.BackendServer, "http://h:1/v1"
	p := NewServePanel(u)
	assert.True(t, p.Toggle.Disabled(), "Start serving is on though serving cannot work")
	assert.Contains(t, p.Status.Text, "serving needs the model on this machine")
}

// The Engine panel's lines that wrap onto more rows push what is under
// them down, also after the last update of a turn (no line drawn over the
// next).
func TestEnginePanelLinesDoNotOverlap(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		relayout(u.Win)
		v.Gauges.Set(bridge.Gauges{Tokens: 31, SecPerToken: 0.1, LastToken: 0.1, TTFT: 0.01, Drafted: 10, Accepted: 5})
		root := v.Gauges.Root.(*fyne.Container)
		var end float32
		for i, o := range root.Objects {
			if !o.Visible() {
				continue
			}
			assert.GreaterOrEqual(t, o.Position().Y, end-0.5, "line %d starts above the end of the one before", i)
			assert.GreaterOrEqual(t, o.Size().Height, o.MinSize().Height-0.5, "line %d is shorter than it needs", i)
			end = o.Position().Y + o.Size().Height
		}
	})
}

// G26: step 1's problem lines end as sentences.
func TestMachineProblemIsASentence(t *testing.T) {
	assert.Equal(t, "the disk has 20 GB free, the trunk needs 109 GB.", fullStop("the disk has 20 GB free, the trunk needs 109 GB"))
	assert.Equal(t, "done.", fullStop("done."))
	assert.Equal(t, "", fullStop(" "))
}

// "1 token", not "1 tokens", under a one-token reply.
func TestStatsSayOneToken(t *testing.T) {
	mv := newMessageView(chat.Message{Role: "assistant", Content: "x", Stats: &chat.ReplyStats{Tokens: 1, FirstTokenSeconds: 0.5}}, messageEnv{})
	assert.Equal(t, "1 token · first token after 0.50 s", mv.statsLbl.Text)
}

// G14: a wheel turned over a code block scrolls the conversation, not the
// code sideways; a sideways wheel still scrolls the code.
func TestWheelOverCodeScrollsTheChat(t *testing.T) {
	test.NewTempApp(t)
	var sc *container.Scroll
	long := strings.Repeat("x := compute(a, b, c) // a long line of code that is wider than the window ", 4)
	mv := newMessageView(chat.Message{Role: "assistant", Content: "Code:\n\n```go\n" + long + "\n" + long + "\n```\n"},
		messageEnv{scroller: func() *container.Scroll { return sc }})
	spacer := canvas.NewRectangle(color.Transparent)
	spacer.SetMinSize(fyne.NewSize(10, 2000))
	sc = container.NewVScroll(container.NewVBox(mv.Root, spacer))
	w := test.NewTempWindow(t, sc)
	w.Resize(fyne.NewSize(500, 300))
	var side *sideScroll
	var find func(o fyne.CanvasObject)
	find = func(o fyne.CanvasObject) {
		switch x := o.(type) {
		case *sideScroll:
			side = x
		case *fyne.Container:
			for _, c := range x.Objects {
				find(c)
			}
		}
	}
	find(mv.body)
	require.NotNil(t, side, "the code block has no side scroll")
	side.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.Delta{DY: -120}})
	assert.Greater(t, sc.Offset.Y, float32(0), "the chat did not scroll")
	assert.Equal(t, float32(0), side.Offset.X, "the code scrolled sideways on an up-down wheel")
	side.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.Delta{DX: -120}})
	assert.Greater(t, side.Offset.X, float32(0), "a sideways wheel does not scroll the code")
}
