package gui

import (
	"fmt"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/hub"
)

// The screens the app must fit, minus 40 units for the menu bar, which the
// desktop driver draws inside the window and the test driver does not.
var screens = []fyne.Size{fyne.NewSize(1024, 600), fyne.NewSize(1280, 760)}

// layoutProblems lays the window's content out at size and lists what does
// not fit: a content minimum larger than size, and every visible button
// outside the window (buttonsOutside).
func layoutProblems(w fyne.Window, size fyne.Size) []string {
	w.Resize(size)
	c := w.Content()
	var out []string
	if m := c.MinSize(); m.Width > size.Width || m.Height > size.Height {
		out = append(out, fmt.Sprintf("content needs %.0fx%.0f", m.Width, m.Height))
	}
	if got := w.Canvas().Size(); got != size {
		out = append(out, fmt.Sprintf("window grew to %.0fx%.0f", got.Width, got.Height))
	}
	return append(out, buttonsOutside(c, size)...)
}

// buttonsOutside lists every visible button of c (as laid out) that lies
// outside 0..size, or, inside a vertical scroll, outside the scroll's width:
// below is reachable by scrolling, beside is not. Content that scrolls
// sideways is reachable whole.
func buttonsOutside(c fyne.CanvasObject, size fyne.Size) []string {
	var out []string
	var walk func(o fyne.CanvasObject, at fyne.Position, clipX, clipW float32)
	walk = func(o fyne.CanvasObject, at fyne.Position, clipX, clipW float32) {
		if o == nil || !o.Visible() {
			return
		}
		at = at.Add(o.Position())
		if b, ok := o.(*widget.Button); ok {
			end := at.X + b.Size().Width
			outside := at.X < clipX-0.5 || end > clipX+clipW+0.5
			if clipX == 0 && clipW == size.Width && at.Y+b.Size().Height > size.Height+0.5 {
				outside = true // not in a scroll: below the window is lost
			}
			if outside {
				out = append(out, fmt.Sprintf("button %q at %.0f,%.0f size %.0fx%.0f is outside %.0f..%.0f",
					b.Text, at.X, at.Y, b.Size().Width, b.Size().Height, clipX, clipX+clipW))
			}
		}
		var kids []fyne.CanvasObject
		switch x := o.(type) {
		case *fyne.Container:
			kids = x.Objects
		case *container.Scroll:
			if x.Direction != container.ScrollVerticalOnly {
				return
			}
			clipX, clipW = at.X, x.Size().Width
			kids = []fyne.CanvasObject{x.Content}
		case fyne.Widget:
			kids = test.WidgetRenderer(x).Objects()
		}
		for _, k := range kids {
			walk(k, at, clipX, clipW)
		}
	}
	walk(c, fyne.Position{}, 0, size.Width)
	return out
}

func requireFits(t *testing.T, w fyne.Window, what string) {
	t.Helper()
	for _, s := range screens {
		if p := layoutProblems(w, s); len(p) > 0 {
			t.Errorf("%s at %.0fx%.0f:\n  %s", what, s.Width, s.Height, strings.Join(p, "\n  "))
		}
	}
}

// Every wizard step, in the states a user sees, fits the small screens.
func TestLayoutWizardFitsSmallScreens(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(u.Start)
	w := u.wizard
	waitFor(t, "machine report", func() bool { return w.Machine.Report != nil })
	ui(func() { requireFits(t, u.Win, "step 1 measured") })

	dir := t.TempDir()
	ui(func() {
		w.Go(1)
		requireFits(t, u.Win, "step 2 empty")
		w.Model.Dir.SetText(dir + "/" + strings.Repeat("a-very-long-folder-name-", 8))
		w.Model.Layers.SetText("4")
		test.Tap(w.Model.VerifyBt)
	})
	waitFor(t, "verify", func() bool { return w.Model.Verified != nil })
	ui(func() {
		w.Model.showDownload(downloadEventWithLongNames())
		requireFits(t, u.Win, "step 2 with a long folder, download lines and verify results")
		test.Tap(w.Model.DemoBt)
	})
	waitFor(t, "demo", func() bool { return w.D.Demo })
	ui(func() {
		w.Go(2)
		requireFits(t, u.Win, "step 3")
		w.Go(3)
	})
	waitFor(t, "plan", func() bool { return w.Memory.Plan != nil && !w.Memory.busy })
	ui(func() {
		requireFits(t, u.Win, "step 4")
		w.Go(4)
		requireFits(t, u.Win, "step 5")
	})
}

// The chat with a long reply (a wide code line, a long word) fits too.
func TestLayoutChatFitsSmallScreens(t *testing.T) {
	fc := &fakeChat{reply: []string{"Here:\n```go\n" + strings.Repeat("x := 1; ", 60) + "\n```\n",
		strings.Repeat("word", 80) + " and a table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"}}
	u, v := chatUI(t, fc)
	ui(func() { requireFits(t, u.Win, "empty chat") })
	ui(func() { v.Send(strings.Repeat("long-question-", 40)) })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.Len(t, v.History, 2)
		requireFits(t, u.Win, "chat after a long reply")
	})
	assert.NotEmpty(t, v.History[1].Content)
}

func downloadEventWithLongNames() hub.Event {
	var files []hub.FileProgress
	for i := range 6 {
		files = append(files, hub.FileProgress{Name: fmt.Sprintf("model-%05d-of-00096-with-a-long-name.safetensors", i+1),
			State: hub.StateDownloading, Done: 1e9, Total: 3.8e9, Rate: 25e6})
	}
	return hub.Event{Kind: hub.EventProgress, Snap: hub.Snapshot{Done: 6e9, Total: 1560e9, Rate: 150e6, ETA: -1,
		FilesDone: 0, FilesTotal: 99, Files: files}}
}
