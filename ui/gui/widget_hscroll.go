package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// sideScroll scrolls its content sideways only: a wheel turned up or down
// over it goes to the scroll area around it (G14: the chat did not scroll
// over a code block, nor step 2 over its file list). Fyne's horizontal
// scroll takes a vertical wheel as sideways motion.
type sideScroll struct {
	*container.Scroll
	outer func() *container.Scroll // the vertical scroll around it (nil: none yet)
}

func newSideScroll(content fyne.CanvasObject, outer func() *container.Scroll) *sideScroll {
	s := &sideScroll{Scroll: container.NewHScroll(content), outer: outer}
	s.ExtendBaseWidget(s)
	return s
}

func (s *sideScroll) Scrolled(ev *fyne.ScrollEvent) {
	if abs32(ev.Scrolled.DY) > abs32(ev.Scrolled.DX) {
		if s.outer != nil {
			if o := s.outer(); o != nil {
				o.Scrolled(ev)
			}
		}
		return
	}
	s.Scroll.Scrolled(ev)
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// wheelPass lies over a one-line text field and hands the wheel to the
// page's scroll (G14): Fyne's Entry scrolls its line sideways inside, so
// a wheel over it moved nothing and the page stopped under the pointer.
// It takes nothing else: clicks, typing and the text cursor reach the
// field under it.
type wheelPass struct {
	widget.BaseWidget
	outer func() *container.Scroll
}

func (w *wheelPass) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(canvas.NewRectangle(color.Transparent))
}

func (w *wheelPass) Scrolled(ev *fyne.ScrollEvent) {
	if o := w.outer(); o != nil {
		o.Scrolled(ev)
	}
}

// passWheel puts field under a wheelPass for the page scroll outer returns.
func passWheel(field fyne.CanvasObject, outer func() *container.Scroll) fyne.CanvasObject {
	w := &wheelPass{outer: outer}
	w.ExtendBaseWidget(w)
	return container.NewStack(field, w)
}
