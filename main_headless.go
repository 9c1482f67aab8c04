//go:build headless || !cgo

package main

import (
	"fmt"
	"io"

	"k3/ui/cli"
)

// headlessNote is what `k3` with no arguments prints in a build without the
// desktop app (built with -tags headless, or without cgo, which Fyne needs).
const headlessNote = `k3: this is the headless build (no desktop app): every command works, the window does not.
Run 'k3 help' for the commands, e.g. 'k3 doctor' or 'k3 chat MODEL_DIR'.
For the desktop app, use a release package (k3.tar.xz, k3.exe, k3.app) or build it with cgo
and the system's OpenGL/X11 headers: 'make run' (Linux), 'make package' for the per-platform steps.
`

// openApp explains how to get the app; usage exit code (nothing was run).
func openApp(stderr io.Writer) int {
	fmt.Fprint(stderr, headlessNote)
	return cli.ExitUsage
}
