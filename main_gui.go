//go:build !headless && cgo

package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"k3/ui/cli"
	"k3/ui/gui"
)

// noDisplay is what a bare `k3` says where no window can open (a server, a
// container, an ssh session without X forwarding); exit code ExitUsage:
// nothing was run.
const noDisplay = "no display: run k3 --help for the commands"

// openApp opens the desktop window: Fyne runs it on the main thread. With
// no display it says so in one line instead of letting GLFW fail (which
// ended in a Go panic and its stack trace).
func openApp(stderr io.Writer) (code int) {
	if !hasDisplay() {
		fmt.Fprintln(stderr, noDisplay)
		return cli.ExitUsage
	}
	defer func() {
		// a display named but not reachable: GLFW panics when the window
		// cannot be made
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s (the window could not open: %v)\n", noDisplay, r)
			code = cli.ExitUsage
		}
	}()
	gui.Version = cli.Version
	return gui.Open()
}

// waylandBuild is set by a build with Fyne's wayland tag, whose window
// opens on a Wayland display; the default build's GLFW speaks X11 only.
var waylandBuild = false

// hasDisplay reports whether a window can be asked for: on Linux and the
// BSDs an X11 display must be named (or a Wayland one, in a wayland
// build: a Wayland session without XWayland leaves DISPLAY empty and the
// X11 window cannot open); macOS and Windows always have one for a
// logged-in user.
func hasDisplay() bool {
	switch runtime.GOOS {
	case "darwin", "windows":
		return true
	}
	return os.Getenv("DISPLAY") != "" || waylandBuild && os.Getenv("WAYLAND_DISPLAY") != ""
}
