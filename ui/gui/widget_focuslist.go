package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/data/binding"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// focusList is a list of strings bound to data that shows when it has the
// keyboard focus with a ring around it (G8): Fyne marks the focused row
// with the hover colour, which the selection colour hides when the row is
// also the one selected, so Tab seemed to stop on nothing.
type focusList struct {
	widget.List
	ring *canvas.Rectangle
}

// newFocusList is widget.NewListWithData with the focus ring; Root (the
// list and its ring) goes into the layout.
func newFocusList(data binding.DataList, create func() fyne.CanvasObject, update func(binding.DataItem, fyne.CanvasObject)) *focusList {
	l := &focusList{ring: canvas.NewRectangle(color.Transparent)}
	l.Length = data.Length
	l.CreateItem = create
	l.UpdateItem = func(i widget.ListItemID, o fyne.CanvasObject) {
		if item, err := data.GetItem(i); err == nil {
			update(item, o)
		}
	}
	l.ExtendBaseWidget(l)
	data.AddListener(binding.NewDataListener(l.Refresh))
	l.ring.StrokeWidth = 2
	l.ring.CornerRadius = theme.InputRadiusSize()
	l.ring.Hide()
	return l
}

// Root is the list with its ring over it.
func (l *focusList) Root() fyne.CanvasObject {
	return &fyne.Container{Layout: stackLayout{}, Objects: []fyne.CanvasObject{l, l.ring}}
}

func (l *focusList) FocusGained() {
	l.List.FocusGained()
	l.ring.StrokeColor = theme.Color(theme.ColorNamePrimary)
	l.ring.Show()
	l.ring.Refresh()
}

func (l *focusList) FocusLost() {
	l.List.FocusLost()
	l.ring.Hide()
}

// Hide hides the ring with the list.
func (l *focusList) Hide() {
	l.List.Hide()
	l.ring.Hide()
}

// stackLayout lays every object over the whole area (container.NewStack's
// layout, usable in a struct literal).
type stackLayout struct{}

func (stackLayout) Layout(objs []fyne.CanvasObject, s fyne.Size) {
	for _, o := range objs {
		o.Resize(s)
		o.Move(fyne.NewPos(0, 0))
	}
}

func (stackLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var m fyne.Size
	for _, o := range objs {
		if o.Visible() {
			m = m.Max(o.MinSize())
		}
	}
	return m
}
