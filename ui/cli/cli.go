// Package cli is k3's command-line face: subcommand dispatch, flags,
// reports and the chat REPL. Each subcommand lives in its own file and
// registers itself in init.
package cli

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// Exit codes shared by every subcommand (documented in README.md).
const (
	ExitOK          = 0 // success
	ExitRuntime     = 1 // runtime failure (I/O, missing tensor, plan refused)
	ExitUsage       = 2 // bad usage, invalid input or a refused config
	ExitOutput      = 3 // --out (or another output file) not writable
	ExitExpertLoad  = 4 // a routed expert failed to load: the run is invalid
	ExitInterrupted = 5 // stopped by Ctrl-C after finishing the step in flight
)

// Version is the program version; overridable with -ldflags "-X k3/ui/cli.Version=...".
var Version = "0.1.0"

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

// register adds a subcommand; called from init functions.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	if _, dup := commands[name]; dup {
		panic("cli: duplicate command " + name)
	}
	commands[name] = command{name, summary, run}
}

// Main runs k3 with the given arguments and returns the exit code.
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return ExitOK
	case "--list-presets":
		args[0] = "presets"
	case "--version", "version":
		fmt.Fprintf(stdout, "k3 %s\n", Version)
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "k3: unknown command %q (run 'k3 --help' for the list)\n", args[0])
		return ExitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "k3 %s: Kimi K3 on one machine\n\n", Version)
	fmt.Fprintln(w, "usage: k3                 open the desktop app")
	fmt.Fprintln(w, "       k3 COMMAND [flags] run headless")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 runtime failure, 2 usage or refused input, 3 output not writable,")
	fmt.Fprintln(w, "            4 a routed expert failed to load (run invalid), 5 interrupted")
}
