package gui

import (
	"fyne.io/fyne/v2"
)

// preferredSize is the window's size on a screen with room for it.
var preferredSize = fyne.NewSize(1280, 800)

// titleBar is left free above the window when the screen is too small for
// preferredSize, so a window manager's title bar does not push the bottom
// row (Next, Send) off the screen.
const titleBar = 32

// fitScreen sizes the window to preferredSize, or to the screen's work area
// when that is smaller. Call it on the Fyne goroutine once the app runs.
func fitScreen(w fyne.Window) {
	size := preferredSize
	if px, ok := screenPixels(); ok {
		sc := w.Canvas().Scale()
		if sc <= 0 {
			sc = 1
		}
		scr := fyne.NewSize(float32(px.X)/sc, float32(px.Y)/sc)
		if scr.Width < size.Width {
			size.Width = scr.Width
		}
		if scr.Height < size.Height {
			size.Height = max(scr.Height-titleBar, scr.Height*0.9)
		}
	}
	w.Resize(size)
}
