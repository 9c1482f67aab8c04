//go:build xvfb

// The real-window check (make gui-check, run by make test when xvfb-run
// exists): the app opens a real window under Xvfb with the demo model,
// drives one chat turn, and saves a screenshot of the chat with gauges.
// Built only with -tags xvfb so plain `go test ./...` stays headless.
package gui

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
)

var (
	realApp  fyne.App
	u        *UI
	w        fyne.Window
	setupErr error
)

// TestMain opens the app's window with the demo model the way `k3` does and
// runs the tests beside the Fyne event loop, which must own the main thread.
func TestMain(m *testing.M) {
	realApp = app.NewWithID(AppID + ".check")
	data, err := os.MkdirTemp("", "k3-gui-check")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(data)
	b := RealBackends(data)
	setupErr = b.MakeDemo(filepath.Join(data, "demo-model"))
	s := DefaultSettings()
	s.WizardDone, s.ModelDir, s.Demo, s.Preset, s.MaxTokens = true, filepath.Join(data, "demo-model"), true, "laptop", 32
	s.Save(realApp.Preferences())
	u, w = NewWindow(realApp, b)
	realApp.Lifecycle().SetOnStarted(u.Start)
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

func TestRealWindow(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	// the window must appear and render
	deadline := time.Now().Add(20 * time.Second)
	for {
		var sz fyne.Size
		fyne.DoAndWait(func() { sz = w.Canvas().Size() })
		if sz.Width >= 600 && sz.Height >= 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the window did not appear (canvas %v)", sz)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var v *ChatView
	fyne.DoAndWait(func() { v = u.Chat })
	if v == nil {
		t.Fatal("the chat did not open")
	}
	fyne.DoAndWait(func() {
		v.Entry.SetText("Hello! Show me a code block, please.")
		v.SendEntry()
	})
	deadline = time.Now().Add(60 * time.Second)
	for {
		busy := true
		fyne.DoAndWait(func() { busy = v.Busy })
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the chat turn did not complete in 60 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var last string
	var n int
	var notice string
	fyne.DoAndWait(func() {
		n = len(v.History)
		if n > 0 {
			m := v.History[n-1]
			last = m.Role + ":" + string(m.Cut)
		}
		notice = v.Notice.Text
	})
	if n < 2 || (last != "assistant:" && last != "assistant:turn cap") || notice != "" {
		t.Fatalf("turn did not complete: %d messages, last %q, notice %q", n, last, notice)
	}
	var img image.Image
	for i := 0; i < 20; i++ {
		fyne.DoAndWait(func() { w.Content().Refresh() })
		time.Sleep(250 * time.Millisecond) // let the frame render
		// Canvas.Capture reads the GL front buffer, which Mesa's software
		// renderer under Xvfb leaves black; the X server's copy is right.
		fyne.DoAndWait(func() { img = w.Canvas().Capture() })
		if r, g, b, _ := img.At(10, 10).RGBA(); r|g|b != 0 {
			break
		}
		if x, err := xwdRoot(); err == nil {
			if r, g, b, _ := x.At(10, 10).RGBA(); r|g|b != 0 {
				img = x
				break
			}
		}
	}
	if img == nil || img.Bounds().Dx() < 600 {
		t.Fatal("no screenshot")
	}
	colors := map[[3]uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y += 7 {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	if len(colors) < 8 {
		r, g, b, _ := img.At(10, 10).RGBA()
		t.Fatalf("the window looks blank (%d colours, e.g. %d %d %d)", len(colors), r>>8, g>>8, b>>8)
	}
	out := os.Getenv("K3_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "chat.png")
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Logf("screenshot: %s (%dx%d)", out, img.Bounds().Dx(), img.Bounds().Dy())
	fyne.DoAndWait(func() {
		v.Shutdown()
		w.Close()
	})
}

// xwdRoot captures the X screen with xwd and decodes its ZPixmap output
// (24/32-bit TrueColor, the Xvfb default).
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
	if h[2] != 2 || bpp != 32 {
		return nil, fmt.Errorf("xwd: format %d, %d bits per pixel not handled", h[2], bpp)
	}
	off := int(h[0]) + 12*ncolors
	if off+height*bpl > len(out) {
		return nil, fmt.Errorf("xwd: truncated")
	}
	lsb := h[7] == 0
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	for y := 0; y < height; y++ {
		for x := 0; x < width; x++ {
			p := out[off+y*bpl+4*x:]
			if lsb {
				img.SetRGBA(x, y, color.RGBA{p[2], p[1], p[0], 255})
			} else {
				img.SetRGBA(x, y, color.RGBA{p[1], p[2], p[3], 255})
			}
		}
	}
	return img, nil
}
