package gui

import (
	"context"
	"image"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/bridge"
)

// G3: at 1024x640 the Thinking/Settings/Regenerate row stays where it is
// between streaming (the phase shown) and done (the context count shown):
// it moved 40 px.
func TestToolsRowStaysPut(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	at := func() fyne.Position {
		relayout(u.Win)
		return fyne.CurrentApp().Driver().AbsolutePositionForObject(v.Thinking)
	}
	var idle, streaming fyne.Position
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 640))
		idle = at()
		v.Send("Tell me a saying about time")
	})
	waitFor(t, "the engine's phase", func() bool { return v.Phase.Text == "answering" })
	ui(func() { streaming = at() })
	for range 5 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		require.NotEmpty(t, v.ContextLb.Text, "the context count is shown after the reply")
		assert.Equal(t, streaming, at(), "the row moved between streaming and done")
		assert.Equal(t, idle, at(), "the row moved between idle and done")
	})
}

// G19: in a narrow window (800x500) the Engine panel gives its room to
// the chat (it took 36% of the window); at 1024 and wider it is there.
func TestNarrowWindowCollapsesThePanel(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	d := fyne.CurrentApp().Driver()
	ui(func() {
		u.Win.Resize(fyne.NewSize(800, 500))
		relayout(u.Win)
		win := u.Win.Canvas().Size().Width
		chatRight := d.AbsolutePositionForObject(v.scroller).X + v.scroller.Size().Width
		assert.Greater(t, chatRight, win-40, "the chat does not take the room")
		assert.GreaterOrEqual(t, d.AbsolutePositionForObject(v.GaugesPanel).X, chatRight, "the panel is still in view at 800 wide")

		u.Win.Resize(fyne.NewSize(1024, 640))
		relayout(u.Win)
		x := d.AbsolutePositionForObject(v.GaugesPanel).X
		assert.InDelta(t, float64(u.Win.Canvas().Size().Width-gaugesWidth), float64(x), 20, "the panel is not at the right at 1024")
	})
}

// N9: on a screen without a window manager (the work area is the whole
// screen) the window takes the screen: 1024x640, not 1024x608 with a black
// strip; where a window manager keeps a panel, room for a title bar is
// left; a large screen gets the preferred size.
func TestWindowFitsTheScreen(t *testing.T) {
	pt := func(x, y int) image.Point { return image.Pt(x, y) }
	assert.Equal(t, fyne.NewSize(1024, 640), fitSize(pt(1024, 640), pt(1024, 640), 1))
	assert.Equal(t, fyne.NewSize(1024, 600-titleBar), fitSize(pt(1024, 600), pt(1024, 640), 1))
	assert.Equal(t, preferredSize, fitSize(pt(1920, 1040), pt(1920, 1080), 1))
	assert.Equal(t, fyne.NewSize(1024, 640), fitSize(pt(2048, 1280), pt(2048, 1280), 2))
}

// readingChat says where reading a reused prompt is, in the words the
// app's engine uses (bridge.PrefillETA), and holds the turn there until
// hold is closed.
type readingChat struct {
	fakeChat
	line string
	hold chan struct{}
}

func (f *readingChat) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	on(engine.Event{Kind: engine.EventPhase, Text: f.line})
	select {
	case <-f.hold:
	case <-ctx.Done():
	}
	return f.fakeChat.Turn(ctx, h, opt, on)
}

// The status line at 1024x640 (seen in make gui-check's walk): the line
// of a prompt read after a reuse shows its passes and time left (the
// reuse came first and cut them: "reused 522 of 1151 cached positions ·
// reading prompt 538/1151 (pass …"), and the context count after the
// reply reads whole (it was "…" at every size: a cut label beside the
// phase takes no room).
func TestStatusLineReadsWholeAt1024(t *testing.T) {
	var eta bridge.PrefillETA
	t0 := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	eta.Begin()
	eta.Phase(16, 640, 0, 16, t0.Add(100*time.Millisecond)) // a pass measured on the last prompt
	eta.Begin()
	eta.Phase(522, 1151, 522, 0, t0.Add(time.Second))
	fc := &readingChat{line: eta.Phase(538, 1151, 522, 16, t0.Add(1100*time.Millisecond)), hold: make(chan struct{})}
	require.True(t, strings.HasPrefix(fc.line, "reading prompt 538/1151 (pass 1 of 40), "), fc.line)
	head := fc.line[:strings.Index(fc.line, " left")+len(" left")]
	u, _ := newTestUI(t, &fc.fakeChat)
	u.B.NewChat = func(bridge.Settings) (bridge.ChatEngine, error) { return fc, nil }
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	fits := func(l *noteLabel, text string) bool {
		return l.Visible() && l.Size().Width >= fyne.MeasureText(text, theme.TextSize(), l.TextStyle).Width
	}
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 640))
		v.Send("Tell me about the weather in the mountains.")
	})
	waitFor(t, "the reading line", func() bool { return v.Phase.Text == fc.line })
	ui(func() {
		relayout(u.Win)
		assert.True(t, fits(v.Phase, head), "the reading line is cut before its time left: %.0f px for %q", v.Phase.Size().Width, head)
	})
	close(fc.hold)
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		relayout(u.Win)
		require.NotEmpty(t, v.ContextLb.Text)
		assert.True(t, fits(v.ContextLb, v.ContextLb.Text), "the context count is cut: %.0f px for %q", v.ContextLb.Size().Width, v.ContextLb.Text)
	})
}

// N9: the window's first frame, before the app's event loop starts the
// UI, says the app is starting (it was black for 1.5 s: the window had
// no content until Start).
func TestFirstFrameSaysStarting(t *testing.T) {
	a := test.NewTempApp(t)
	u, w := newWindow(a, bridge.Backends{DataDir: t.TempDir(), Machine: &fakeMachine{}})
	t.Cleanup(w.Close)
	require.NotNil(t, u)
	require.NotNil(t, w.Content(), "the first frame is empty")
	assert.NotNil(t, findLabel(w.Content(), startingText), "the first frame does not say the app is starting")
}
