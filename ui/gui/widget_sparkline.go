package gui

import (
	"image/color"
	"strconv"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// sparkline is a small line plot of the last HistoryWindow of samples, with
// its scale (the top and bottom values) written at the left, beside the
// plot: the line starts right of the labels (they were drawn over it, G22). A zero Point
// is a gap: idle time between turns is not drawn as a line.
type sparkline struct {
	widget.BaseWidget
	points []bridge.Point
	now    time.Time
	Color  fyne.ThemeColorName
	// Format writes a value of the scale (nil: plain number).
	Format func(float64) string
}

// newSparkline returns an empty plot.
func newSparkline(c fyne.ThemeColorName, format func(float64) string) *sparkline {
	s := &sparkline{Color: c, Format: format}
	s.ExtendBaseWidget(s)
	return s
}

// SetPoints replaces the samples and redraws.
func (s *sparkline) SetPoints(ps []bridge.Point, now time.Time) {
	s.points, s.now = ps, now
	s.Refresh()
}

// Points returns the samples shown (gaps included).
func (s *sparkline) Points() []bridge.Point { return s.points }

func (s *sparkline) CreateRenderer() fyne.WidgetRenderer {
	r := &sparkRenderer{s: s, bg: canvas.NewRectangle(color.Transparent),
		top: canvas.NewText("", color.Transparent), bottom: canvas.NewText("", color.Transparent)}
	r.top.TextSize = theme.CaptionTextSize()
	r.bottom.TextSize = theme.CaptionTextSize()
	r.Refresh()
	return r
}

type sparkRenderer struct {
	s           *sparkline
	bg          *canvas.Rectangle
	top, bottom *canvas.Text
	lines       []*canvas.Line
	size        fyne.Size
}

func (r *sparkRenderer) MinSize() fyne.Size { return fyne.NewSize(200, 48) }

func (r *sparkRenderer) Layout(size fyne.Size) {
	r.size = size
	r.bg.Resize(size)
	r.place()
}

// bounds are the value range drawn: from 0 (or below) to the largest value.
func bounds(ps []bridge.Point) (lo, hi float64, ok bool) {
	for _, p := range ps {
		if p.T.IsZero() {
			continue
		}
		if !ok {
			lo, hi, ok = p.V, p.V, true
		}
		lo, hi = min(lo, p.V), max(hi, p.V)
	}
	lo = min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi, ok
}

func (r *sparkRenderer) place() {
	ps := r.s.points
	size := r.size
	lo, hi, ok := bounds(ps)
	for _, l := range r.lines {
		l.Hide()
	}
	if !ok || size.Width <= 0 {
		r.top.Text, r.bottom.Text = "", ""
		return
	}
	f := r.s.Format
	if f == nil {
		f = func(v float64) string { return trimFloat(v) }
	}
	r.top.Text, r.bottom.Text = f(hi), f(lo)
	r.top.Move(fyne.NewPos(2, 0))
	r.bottom.Move(fyne.NewPos(2, size.Height-r.bottom.MinSize().Height))
	left := r.gutter()
	width := max(size.Width-left, 1)
	now := r.s.now
	if now.IsZero() {
		now = ps[len(ps)-1].T
	}
	// the axis spans the history window, or less while the data is younger
	t0 := now.Add(-bridge.HistoryWindow)
	for _, p := range ps {
		if !p.T.IsZero() {
			if p.T.After(t0) {
				t0 = p.T
			}
			break
		}
	}
	span := max(now.Sub(t0).Seconds(), 1e-3)
	pos := func(p bridge.Point) fyne.Position {
		x := float32(p.T.Sub(t0).Seconds()/span) * width
		y := size.Height - 2 - float32((p.V-lo)/(hi-lo))*(size.Height-4)
		return fyne.NewPos(left+max(0, min(x, width)), y)
	}
	for i := 0; i+1 < len(ps) && i < len(r.lines); i++ {
		if ps[i].T.IsZero() || ps[i+1].T.IsZero() {
			continue
		}
		l := r.lines[i]
		l.Position1, l.Position2 = pos(ps[i]), pos(ps[i+1])
		l.Show()
	}
}

// gutter is the width the scale's labels take at the left (and a gap).
func (r *sparkRenderer) gutter() float32 {
	return max(r.top.MinSize().Width, r.bottom.MinSize().Width) + 2 + theme.Padding()
}

func formatFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func trimFloat(v float64) string {
	switch {
	case v >= 100:
		return formatFloat(v, 0)
	case v >= 1:
		return formatFloat(v, 1)
	}
	return formatFloat(v, 2)
}

func (r *sparkRenderer) Refresh() {
	col := theme.ColorForWidget(r.s.Color, r.s)
	r.bg.FillColor = theme.ColorForWidget(theme.ColorNameInputBackground, r.s)
	r.top.Color = theme.ColorForWidget(theme.ColorNamePlaceHolder, r.s)
	r.bottom.Color = r.top.Color
	if n := max(len(r.s.points)-1, 0); len(r.lines) > n {
		r.lines = r.lines[:n]
	}
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
	r.top.Refresh()
	r.bottom.Refresh()
	for _, l := range r.lines {
		l.Refresh()
	}
}

func (r *sparkRenderer) Objects() []fyne.CanvasObject {
	objs := []fyne.CanvasObject{r.bg}
	for _, l := range r.lines {
		objs = append(objs, l)
	}
	return append(objs, r.top, r.bottom)
}

func (r *sparkRenderer) Destroy() {}
