package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// textRows shows lines one label a row, in the scroll area around it: a
// widget.List there had a scroll of its own that caught the wheel, so the
// step moved only its inner box (G14).
type textRows struct {
	Root  *fyne.Container
	lines func() []string
}

func newTextRows(lines func() []string) *textRows {
	r := &textRows{Root: container.NewVBox(), lines: lines}
	r.Refresh()
	return r
}

// Length is the number of rows shown.
func (r *textRows) Length() int { return len(r.Root.Objects) }

// Refresh shows the lines again.
func (r *textRows) Refresh() {
	lines := r.lines()
	objs := make([]fyne.CanvasObject, len(lines))
	for i, l := range lines {
		lbl := widget.NewLabel(l)
		lbl.Truncation = fyne.TextTruncateEllipsis
		objs[i] = lbl
	}
	r.Root.Objects = objs
	r.Root.Refresh()
}
