package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// flowLayout places objects left to right at their minimum size and starts
// a new row when the next one does not fit. Its minimum width is the widest
// object's, so a row of buttons never widens the window; its minimum height
// is that of the rows the last Layout needed (the canvas lays the parent out
// again when it changes). Fyne's RowWrapLayout keeps the width of its last
// layout as its minimum, so a window that was wide could not shrink again.
type flowLayout struct{ rows int }

// newFlow is a container that wraps its objects into rows.
func newFlow(objs ...fyne.CanvasObject) *fyne.Container {
	return &fyne.Container{Layout: &flowLayout{}, Objects: objs}
}

func (l *flowLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var w, h float32
	n := 0
	for _, o := range objs {
		if !o.Visible() {
			continue
		}
		s := o.MinSize()
		w, h = max(w, s.Width), max(h, s.Height)
		n++
	}
	if n == 0 {
		return fyne.Size{}
	}
	rows := max(l.rows, 1)
	return fyne.NewSize(w, float32(rows)*h+float32(rows-1)*theme.Padding())
}

func (l *flowLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	pad := theme.Padding()
	var h float32
	for _, o := range objs {
		if o.Visible() {
			h = max(h, o.MinSize().Height)
		}
	}
	x, y, rows := float32(0), float32(0), 1
	first := true
	for _, o := range objs {
		if !o.Visible() {
			continue
		}
		s := o.MinSize()
		if !first && x+s.Width > size.Width {
			x, y = 0, y+h+pad
			rows++
		}
		first = false
		o.Move(fyne.NewPos(x, y+(h-s.Height)/2))
		o.Resize(s)
		x += s.Width + pad
	}
	l.rows = rows
}

// fixedWidth lays its objects out at the size it is given and asks for
// exactly Width (the height is the objects' own), so what they show can
// never move what is beside it: the Engine panel's changing lines used to
// widen it and push the chat column, Send and Stop sideways.
type fixedWidth struct{ Width float32 }

func (l fixedWidth) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var h float32
	for _, o := range objs {
		if o.Visible() {
			h = max(h, o.MinSize().Height)
		}
	}
	return fyne.NewSize(l.Width, h)
}

func (l fixedWidth) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Move(fyne.Position{})
		o.Resize(size)
	}
}
