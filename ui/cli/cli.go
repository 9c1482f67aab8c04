// Package cli is k3's command-line face: subcommand dispatch, flags,
// reports and the chat REPL. Each subcommand lives in its own file and
// registers itself in init.
package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"k3/doctor"
)

// Exit codes shared by every subcommand (documented in README.md).
const (
	ExitOK          = 0 // success
	ExitRuntime     = 1 // runtime failure (I/O, missing tensor, plan refused)
	ExitUsage       = 2 // bad usage, invalid input or a refused config
	ExitOutput      = 3 // --out (or another output file) not writable
	ExitExpertLoad  = 4 // a routed expert failed to load: the run is invalid
	ExitInterrupted = 5 // stopped by Ctrl-C: the pass in flight stops before its next layer, results so far written
)

// Version is the program version; overridable with -ldflags "-X k3/ui/cli.Version=...".
var Version = "0.1.0"

// runFunc runs one subcommand with its arguments and returns the exit code.
type runFunc func(args []string, stdout, stderr io.Writer) int

type command struct {
	name    string
	summary string
	run     runFunc
}

// registry is a set of subcommands: k3's own (commands) and those of
// `k3 bench` (benchCommands). Files add theirs from an init function.
type registry struct {
	prog    string // "k3", "k3 bench": the prefix of its messages
	unknown string // the message for a name not registered (%q: the name)
	width   int    // of the name column in list
	cmds    map[string]command
}

func newRegistry(prog, unknown string, width int) *registry {
	return &registry{prog: prog, unknown: unknown, width: width, cmds: map[string]command{}}
}

// add registers a subcommand; a name registered twice is a bug.
func (r *registry) add(name, summary string, run runFunc) {
	if _, dup := r.cmds[name]; dup {
		panic("cli: duplicate command " + r.prog + " " + name)
	}
	r.cmds[name] = command{name, summary, run}
}

// dispatch runs the subcommand args[0] with the rest of args.
func (r *registry) dispatch(args []string, stdout, stderr io.Writer) int {
	c, ok := r.cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "%s: "+r.unknown+"\n", r.prog, args[0])
		return ExitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

// list prints one line per subcommand, sorted by name.
func (r *registry) list(w io.Writer) {
	names := make([]string, 0, len(r.cmds))
	for n := range r.cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s %s\n", r.width, n, r.cmds[n].summary)
	}
}

var commands = newRegistry("k3", "unknown command %q (run 'k3 --help' for the list)", 12)

// register adds a top-level subcommand; called from init functions.
func register(name, summary string, run runFunc) { commands.add(name, summary, run) }

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
	// --version and --list-presets after a command, as the C engine took
	// them anywhere on the line
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		switch a {
		case "--version", "-version":
			fmt.Fprintf(stdout, "k3 %s\n", Version)
			return ExitOK
		case "--list-presets", "-list-presets":
			return commands.dispatch([]string{"presets"}, stdout, stderr)
		}
	}
	line := cCommandLine(args, stderr)
	if h := helpLine(line); h != nil {
		return commands.dispatch(h, stdout, stdout)
	}
	code := commands.dispatch(line, stdout, stderr)
	commandOrFolder(args[0], code, stderr)
	return code
}

// helpLine is the command line of a command's help when args ask for it
// anywhere (-h, -help or --help before "--"), as the C engine honoured
// --help anywhere before anything else: the command's words up to its
// first flag, then -h. The caller prints it on stdout, so that
// `k3 run --help | less` shows it. nil when no help is asked for.
func helpLine(args []string) []string {
	words := len(args)
	for i, a := range args {
		if a == "--" {
			return nil
		}
		if strings.HasPrefix(a, "-") && words == len(args) {
			words = i
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return append(slices.Clone(args[:words]), "-h")
		}
	}
	return nil
}

// commandOrFolder adds a hint when a command's name is also a model folder
// here and the command refused its arguments: `k3 demo --gen 8` after
// `k3 demo demo` meant the folder (the C engine's first word), but a
// command's name wins.
func commandOrFolder(first string, code int, stderr io.Writer) {
	if _, known := commands.cmds[first]; known && code == ExitUsage && doctor.LooksLikeModelDir(first) {
		fmt.Fprintf(stderr, "note: %s is also a model folder here; to run it: k3 run ./%s ...\n", first, first)
	}
}

// cCommandLine turns the C engine's command lines into k3's: the model
// folder as the first word (`k3 ~/k3model --gen 8 ...`) runs `k3 run`, and
// --chat among run's flags runs `k3 chat`; the change is said once on
// stderr.
func cCommandLine(args []string, stderr io.Writer) []string {
	_, known := commands.cmds[args[0]]
	folder := !known && !strings.HasPrefix(args[0], "-") && doctor.LooksLikeModelDir(args[0])
	if !folder && args[0] != "run" {
		return args
	}
	rest := args
	if !folder {
		rest = args[1:]
	}
	cmd, chatAt := "run", -1
	for i, a := range rest {
		if a == "--" {
			break
		}
		if a == "--chat" || a == "-chat" {
			cmd, chatAt = "chat", i
			break
		}
	}
	if chatAt >= 0 {
		rest = slices.Delete(slices.Clone(rest), chatAt, chatAt+1)
	}
	switch {
	case folder:
		fmt.Fprintf(stderr, "note: %s is a model folder: running it as 'k3 %s %s ...' (the C engine's command line; k3 %s -h lists the flags)\n", args[0], cmd, args[0], cmd)
	case chatAt >= 0:
		fmt.Fprintln(stderr, "note: --chat: running it as 'k3 chat' (the C engine's command line; k3 chat -h lists the flags)")
	}
	return append([]string{cmd}, rest...)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "k3 %s: Kimi K3 on one machine\n\n", Version)
	fmt.Fprintln(w, "usage: k3                 open the desktop app")
	fmt.Fprintln(w, "       k3 COMMAND [flags] run headless")
	fmt.Fprintln(w, "\ncommands:")
	commands.list(w)
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 runtime failure, 2 usage or refused input, 3 output not writable,")
	fmt.Fprintln(w, "            4 a routed expert failed to load (run invalid), 5 interrupted")
}
