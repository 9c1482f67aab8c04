// Command k3 runs Kimi K3 on one machine. With no arguments it opens the
// desktop app (a headless build says how to get it); with a subcommand it
// runs the CLI.
package main

import (
	"os"

	"k3/internal/fynelocale"
	"k3/ui/cli"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(openApp(os.Stderr))
	}
	os.Exit(runCLI(os.Args[1:]))
}

// runCLI runs a subcommand on its own goroutine. Fyne's driver locks
// main.main to the main OS thread; with the kernel pool's caller on that
// thread (even after UnlockOSThread), MXFP4 mat-vec on 2 threads ran
// markedly slower and less steadily (docs/BENCHMARKS.md). The headless build
// keeps the same shape so both builds run the CLI alike.
func runCLI(args []string) int {
	fynelocale.Restore() // the commands' child processes see the environment k3 was given
	code := make(chan int)
	go func() { code <- cli.Main(args) }()
	return <-code
}
