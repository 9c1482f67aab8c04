// Command k3 runs Kimi K3 on one machine. With no arguments it opens the
// desktop app; with a subcommand it runs headless.
package main

import (
	"os"

	"k3/ui/cli"
	"k3/ui/gui"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(gui.Open()) // the window: Fyne runs it on the main thread
	}
	// Fyne's driver locks main.main to the main OS thread. A headless
	// command runs on another goroutine: with the kernel pool's caller on
	// that thread (even after UnlockOSThread), MXFP4 mat-vec on 2 threads
	// ran markedly slower and less steadily (docs/BENCHMARKS.md).
	code := make(chan int)
	go func() { code <- cli.Main(os.Args[1:]) }()
	os.Exit(<-code)
}
