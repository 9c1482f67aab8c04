//go:build !wasm && !js && !android && !ios && !test_web_driver

package gui

import (
	"image"

	"github.com/go-gl/glfw/v3.3/glfw"
)

// screenPixels is the primary monitor's work area (the screen without task
// bars) in pixels. Fyne has no API for it; its desktop driver is GLFW, which
// it initialised before the app's OnStarted runs on the main thread.
func screenPixels() (image.Point, bool) {
	m := glfw.GetPrimaryMonitor()
	if m == nil {
		return image.Point{}, false
	}
	_, _, w, h := m.GetWorkarea()
	if w <= 0 || h <= 0 {
		if vm := m.GetVideoMode(); vm != nil {
			w, h = vm.Width, vm.Height
		}
	}
	return image.Pt(w, h), w > 0 && h > 0
}
