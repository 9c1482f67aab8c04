// Command k3 runs Kimi K3 on one machine. With no arguments it opens the
// desktop app; with a subcommand it runs headless.
package main

import (
	"os"

	"k3/ui/cli"
	_ "k3/ui/gui" // the desktop app: sets cli.OpenApp
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
