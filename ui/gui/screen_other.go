//go:build wasm || js || android || ios || test_web_driver

package gui

import (
	"image"
)

func screenPixels() (image.Point, bool) { return image.Point{}, false }
