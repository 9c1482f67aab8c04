package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
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
