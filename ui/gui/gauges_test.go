package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

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

// Issue 27 item 3: with a draft model the gauges show what it gains.
func TestGaugesShowTokensPerPass(t *testing.T) {
	g := newGaugesView()
	g.Set(bridge.Gauges{Tokens: 11, SecPerToken: 0.1, LastToken: 0.1, TTFT: 0.01, Drafted: 8, Accepted: 6})
	assert.Contains(t, g.Speed.Text, "drafted tokens accepted: 6 of 8, 2.50 tokens per pass")
}

// visibleRun lists o's visible widgets in reading order (containers are
// walked, hidden parts skipped): "sep" for a separator, "w" otherwise.
func visibleRun(o fyne.CanvasObject) []string {
	if !o.Visible() {
		return nil
	}
	switch x := o.(type) {
	case *widget.Separator:
		return []string{"sep"}
	case *fyne.Container:
		var out []string
		for _, c := range x.Objects {
			out = append(out, visibleRun(c)...)
		}
		return out
	}
	return []string{"w"}
}

// The Engine panel of a model on a server hides this machine's gauges and
// shows one line between the model and the speed, not two stacked lines.
func TestServerPanelHasOneSeparator(t *testing.T) {
	test.NewTempApp(t)
	v := newGaugesView()
	run := func() string { return strings.Join(visibleRun(v.Root), " ") }
	v.SetModel(bridge.ModelInfo{Name: "kimi-k3 on gpu-box:8000", Remote: true})
	assert.NotContains(t, run(), "sep sep")
	assert.Equal(t, 1, strings.Count(run(), "sep"), run())

	v.SetModel(bridge.ModelInfo{Name: "k3", Layers: 61})
	assert.NotContains(t, run(), "sep sep")
	assert.Equal(t, 2, strings.Count(run(), "sep"), "this machine's gauges between two lines: %s", run())
}
