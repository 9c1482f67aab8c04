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

// panelCollapseWidth is the width of the chat column and the Engine panel
// under which the panel gives its room to the chat (G19: at 800x500 it
// took 36% of the window and the chat had ~130 px of messages).
const panelCollapseWidth = 700

// sidePanel lays out the chat column (objs[0]) and the Engine panel
// (objs[1], gaugesWidth wide) at its right; narrower than
// panelCollapseWidth, the chat takes the whole width and the panel is
// laid out beyond the right edge, out of sight (View → Engine panel still
// hides it for good).
type sidePanel struct{}

// collapsed reports whether the panel gives its room at width w.
func (sidePanel) collapsed(w float32) bool { return w < panelCollapseWidth }

func (l sidePanel) MinSize(objs []fyne.CanvasObject) fyne.Size {
	s := objs[0].MinSize()
	return fyne.NewSize(s.Width, max(s.Height, 0))
}

func (l sidePanel) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	chat, panel := objs[0], objs[1]
	if !panel.Visible() || l.collapsed(size.Width) {
		chat.Move(fyne.NewPos(0, 0))
		chat.Resize(size)
		panel.Move(fyne.NewPos(size.Width+2*gaugesWidth, 0)) // out of sight
		panel.Resize(fyne.NewSize(gaugesWidth, size.Height))
		return
	}
	w := size.Width - gaugesWidth
	chat.Move(fyne.NewPos(0, 0))
	chat.Resize(fyne.NewSize(w, size.Height))
	panel.Move(fyne.NewPos(w, 0))
	panel.Resize(fyne.NewSize(gaugesWidth, size.Height))
}
