package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// newFlags returns a FlagSet that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// setUsage makes fs's usage the given lines (a "usage:" line and what the
// command does) followed by the flag defaults.
func setUsage(fs *flag.FlagSet, stderr io.Writer, lines ...string) {
	fs.Usage = func() {
		for _, l := range lines {
			fmt.Fprintln(stderr, l)
		}
		fs.PrintDefaults()
	}
}

// parseMixed parses flags and positional arguments in any order ("--" ends
// the flags).
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseArgs is parseMixed with the exit code decided: -1 to go on, ExitOK
// after -h (the usage was printed), ExitUsage for a bad flag.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, int) {
	pos, err := parseMixed(fs, args)
	switch {
	case err == flag.ErrHelp:
		return nil, ExitOK
	case err != nil:
		return nil, ExitUsage
	}
	return pos, -1
}

// parseN is parseArgs for a command that takes exactly n positional
// arguments: for another count it prints msg (the usage if msg is "") and
// returns ExitUsage.
func parseN(fs *flag.FlagSet, args []string, n int, stderr io.Writer, msg string) ([]string, int) {
	pos, code := parseArgs(fs, args)
	if code >= 0 {
		return nil, code
	}
	if len(pos) != n {
		if msg == "" {
			fs.Usage()
		} else {
			fmt.Fprintln(stderr, msg)
		}
		return nil, ExitUsage
	}
	return pos, -1
}

// intList is a repeatable integer flag (--stop-id 1 --stop-id 2).
type intList []int

func (l *intList) String() string { return fmt.Sprint([]int(*l)) }
func (l *intList) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 {
		return fmt.Errorf("want a non-negative integer, got %q", s)
	}
	*l = append(*l, v)
	return nil
}

// parseIDs reads "1,2,3" or "1 2 3" strictly.
func parseIDs(s string) ([]int, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(f) == 0 {
		return nil, fmt.Errorf("--ids has no token ids")
	}
	ids := make([]int, len(f))
	for i, x := range f {
		v, err := strconv.Atoi(x)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--ids: %q is not a non-negative integer", x)
		}
		ids[i] = v
	}
	return ids, nil
}
