package gui

import (
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// G22: the sparkline's scale is written beside the line, not over it.
func TestSparklineScaleBesideTheLine(t *testing.T) {
	test.NewTempApp(t)
	s := newSparkline("primary", func(x float64) string { return trimFloat(x) + " s" })
	t0 := time.Unix(1e9, 0)
	s.SetPoints([]bridge.Point{{T: t0, V: 12.5}, {T: t0.Add(time.Second), V: 0.2}, {T: t0.Add(2 * time.Second), V: 3}}, t0.Add(2*time.Second))
	s.Resize(fyne.NewSize(260, 48))
	r := test.TempWidgetRenderer(t, s)
	r.Layout(s.Size())
	var labels, lines []fyne.CanvasObject
	for _, o := range r.Objects() {
		switch o := o.(type) {
		case *canvas.Text:
			labels = append(labels, o)
		case *canvas.Line:
			if o.Visible() {
				lines = append(lines, o)
			}
		}
	}
	require.Len(t, labels, 2)
	require.Len(t, lines, 2)
	assert.Equal(t, "12.5 s", labels[0].(*canvas.Text).Text)
	right := float32(0)
	for _, l := range labels {
		right = max(right, l.Position().X+l.MinSize().Width)
	}
	for _, o := range lines {
		l := o.(*canvas.Line)
		assert.Greater(t, min(l.Position1.X, l.Position2.X), right, "the line starts right of the scale")
		assert.LessOrEqual(t, max(l.Position1.X, l.Position2.X), s.Size().Width)
	}
	assert.InDelta(t, s.Size().Width, lines[1].(*canvas.Line).Position2.X, 0.01, "and ends at the right edge")
}

// G22: after switching the model, "No model loaded yet" is not shown next
// to the old model's memory and plan; the context count goes too.
func TestSwitchingTheModelClearsItsNumbers(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	u.S.ServerURL = "http://gpu-box:8000/v1"
	ui(func() { v.Send("hi") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.Contains(t, v.Gauges.MemText.Text, "in use 1.00 GB")
		require.Equal(t, "context: 41 of 12288 positions", v.ContextLb.Text)
		v.Picker.Refresh()
		v.Picker.Select.SetSelected(v.Picker.Select.Options[1]) // the server
		// a server's model is asked with the first message, not loaded
		assert.Equal(t, "the server's model on gpu-box:8000: asked with the first message", v.Gauges.Model.Text)
		assert.Equal(t, "in use — (peak —)\nplan —, available 16.00 GB", v.Gauges.MemText.Text)
		assert.Equal(t, "", v.ContextLb.Text)
	})
}

// G22: the context count is the shown branch's: switching versions shows
// the count that branch took (it stayed at the other branch's).
func TestContextCountFollowsTheShownVersion(t *testing.T) {
	fc := &fakeChat{}
	_, v := chatUI(t, fc)
	ui(func() { v.Send("one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() { v.Send("two") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "context: 43 of 12288 positions", v.ContextLb.Text)
		test.Tap(v.Views[0].editBt)
		v.Entry.SetText("one, edited")
		test.Tap(v.SendBt)
	})
	waitFor(t, "resend", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "context: 41 of 12288 positions", v.ContextLb.Text)
		v.switchVersion(v.Views[0], -1) // the longer branch
		require.Len(t, v.History, 4)
		assert.Equal(t, "context: 43 of 12288 positions", v.ContextLb.Text)
		v.switchVersion(v.Views[0], +1)
		assert.Equal(t, "context: 41 of 12288 positions", v.ContextLb.Text)
	})
}
