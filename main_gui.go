//go:build !headless && cgo

package main

import (
	"k3/ui/cli"
	"k3/ui/gui"
)

// openApp opens the desktop window: Fyne runs it on the main thread.
func openApp() int {
	gui.Version = cli.Version
	return gui.Open()
}
