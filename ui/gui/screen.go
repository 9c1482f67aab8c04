package gui

import (
	"image"

	"fyne.io/fyne/v2"
)

// preferredSize is the window's size on a screen with room for it.
var preferredSize = fyne.NewSize(1280, 800)

// titleBar is left free above the window when the screen is too small for
// preferredSize, so a window manager's title bar does not push the bottom
// row (Next, Send) off the screen.
const titleBar = 32

// fitScreen sizes the window to preferredSize, or to the screen's work area
// when that is smaller, and centres it. Call it on the Fyne goroutine once
// the app runs.
func fitScreen(w fyne.Window) {
	size := preferredSize
	if work, full, ok := screenPixels(); ok {
		size = fitSize(work, full, w.Canvas().Scale())
	}
	w.Resize(size)
	w.CenterOnScreen()
}

// fitSize is the window size for a screen whose work area is work and
// whole size full (pixels) at scale: preferredSize, or the work area when
// that is smaller, less a title bar's height where a window manager keeps
// part of the screen (a work area smaller than the screen). A screen with
// no window manager (the work area is the screen) gets all of it (N9: a
// 1024x608 window on a 1024x640 screen, a black strip below).
func fitSize(work, full image.Point, scale float32) fyne.Size {
	if scale <= 0 {
		scale = 1
	}
	size := preferredSize
	scr := fyne.NewSize(float32(work.X)/scale, float32(work.Y)/scale)
	if scr.Width < size.Width {
		size.Width = scr.Width
	}
	if scr.Height < size.Height {
		size.Height = scr.Height
		if work != full {
			size.Height = max(scr.Height-titleBar, scr.Height*0.9)
		}
	}
	return size
}
