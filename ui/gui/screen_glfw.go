//go:build !wasm && !js && !android && !ios && !test_web_driver

package gui

import (
	"image"

	"github.com/go-gl/glfw/v3.3/glfw"
)

// screenPixels is the primary monitor's work area (the screen without task
// bars) and its whole size, in pixels. Fyne has no API for it; its desktop
// driver is GLFW, which it initialised before the app's OnStarted runs on
// the main thread.
func screenPixels() (work, full image.Point, ok bool) {
	m := glfw.GetPrimaryMonitor()
	if m == nil {
		return image.Point{}, image.Point{}, false
	}
	_, _, w, h := m.GetWorkarea()
	if vm := m.GetVideoMode(); vm != nil {
		full = image.Pt(vm.Width, vm.Height)
	}
	if w <= 0 || h <= 0 {
		w, h = full.X, full.Y
	}
	if full.X <= 0 {
		full = image.Pt(w, h)
	}
	return image.Pt(w, h), full, w > 0 && h > 0
}
