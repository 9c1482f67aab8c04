package gui

import (
	"image/color"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// Sparkline is a small line plot of the last HistoryWindow of samples.
type Sparkline struct {
	widget.BaseWidget
	points []bridge.Point
	now    time.Time
	Color  fyne.ThemeColorName
}

// NewSparkline returns an empty plot.
func NewSparkline(c fyne.ThemeColorName) *Sparkline {
	s := &Sparkline{Color: c}
	s.ExtendBaseWidget(s)
	return s
}

// SetPoints replaces the samples and redraws.
func (s *Sparkline) SetPoints(ps []bridge.Point, now time.Time) {
	s.points, s.now = ps, now
	s.Refresh()
}

// Points returns the samples shown.
func (s *Sparkline) Points() []bridge.Point { return s.points }

func (s *Sparkline) CreateRenderer() fyne.WidgetRenderer {
	r := &sparkRenderer{s: s, bg: canvas.NewRectangle(color.Transparent)}
	r.Refresh()
	return r
}

type sparkRenderer struct {
	s     *Sparkline
	bg    *canvas.Rectangle
	lines []*canvas.Line
	size  fyne.Size
}

func (r *sparkRenderer) MinSize() fyne.Size { return fyne.NewSize(200, 44) }

func (r *sparkRenderer) Layout(size fyne.Size) {
	r.size = size
	r.bg.Resize(size)
	r.place()
}

func (r *sparkRenderer) place() {
	ps := r.s.points
	size := r.size
	if len(ps) < 2 || size.Width <= 0 {
		for _, l := range r.lines {
			l.Hide()
		}
		return
	}
	lo, hi := ps[0].V, ps[0].V
	for _, p := range ps {
		lo, hi = min(lo, p.V), max(hi, p.V)
	}
	lo = min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	now := r.s.now
	if now.IsZero() {
		now = ps[len(ps)-1].T
	}
	// the axis spans the history window, or less while the data is younger
	t0 := now.Add(-bridge.HistoryWindow)
	if ps[0].T.After(t0) {
		t0 = ps[0].T
	}
	span := max(now.Sub(t0).Seconds(), 1e-3)
	pos := func(p bridge.Point) fyne.Position {
		x := float32(p.T.Sub(t0).Seconds()/span) * size.Width
		y := size.Height - 2 - float32((p.V-lo)/(hi-lo))*(size.Height-4)
		return fyne.NewPos(max(0, min(x, size.Width)), y)
	}
	for i, l := range r.lines {
		if i+1 < len(ps) {
			l.Position1, l.Position2 = pos(ps[i]), pos(ps[i+1])
			l.Show()
		} else {
			l.Hide()
		}
	}
}

func (r *sparkRenderer) Refresh() {
	v := fyne.CurrentApp().Settings().ThemeVariant()
	col := theme.Current().Color(r.s.Color, v)
	r.bg.FillColor = theme.Current().Color(theme.ColorNameInputBackground, v)
	for len(r.lines) < len(r.s.points)-1 {
		l := canvas.NewLine(col)
		l.StrokeWidth = 1.5
		r.lines = append(r.lines, l)
	}
	for _, l := range r.lines {
		l.StrokeColor = col
	}
	r.place()
	r.bg.Refresh()
	for _, l := range r.lines {
		l.Refresh()
	}
}

func (r *sparkRenderer) Objects() []fyne.CanvasObject {
	objs := []fyne.CanvasObject{r.bg}
	for _, l := range r.lines {
		objs = append(objs, l)
	}
	return objs
}

func (r *sparkRenderer) Destroy() {}
