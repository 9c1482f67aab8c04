package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"k3/storage/units"
	"k3/tokenizer"
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

// printHelp prints a command's usage and its flags on stdout, for -h in a
// command that prints its own usage (and so silences fs.Usage).
func printHelp(fs *flag.FlagSet, stdout io.Writer, usage string) {
	fmt.Fprintln(stdout, usage)
	fs.SetOutput(stdout)
	fs.PrintDefaults()
}

// parseMixed parses flags and positional arguments in any order ("--" ends
// the flags). Numeric flags are strict (see checkNumbers).
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	args, err := cSpellings(fs, args)
	if err != nil {
		fmt.Fprintf(fs.Output(), "%s: %v\n", progName(fs), err)
		return nil, err
	}
	if err := checkNumbers(fs, args); err != nil {
		fmt.Fprintf(fs.Output(), "%s: %v (%s -h lists the flags)\n", progName(fs), err, progName(fs))
		return nil, err
	}
	var pos []string
	for {
		if err := parseQuiet(fs, args); err != nil {
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

// parseQuiet is fs.Parse with a refused value or a missing one said in one
// line (the flag package follows its message with the whole usage, ~60
// lines for k3 run); the usage is printed for -h only.
func parseQuiet(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp) && usage != nil:
		usage()
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(out, "usage of %s:\n", progName(fs))
		fs.PrintDefaults()
	case err != nil:
		fmt.Fprintf(out, "%s: %v (%s -h lists the flags)\n", progName(fs), err, progName(fs))
	}
	return err
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
	if err != nil || v < 0 || !units.Digits(strings.TrimSpace(s)) {
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
		if err != nil || v < 0 || !units.Digits(x) {
			return nil, fmt.Errorf("--ids: %q is not a non-negative integer", x)
		}
		ids[i] = v
	}
	return ids, nil
}

// checkNumbers refuses numeric flag values the flag package would take but
// that are no plain number: NaN and infinities (which pass every range
// check), a sign on an integer ("+5"), hexadecimal, octal or underscores.
// Each command then checks its own ranges.
func checkNumbers(fs *flag.FlagSet, args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return nil
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(a[1:], "-")
		val, hasVal := "", false
		if k := strings.IndexByte(name, '='); k >= 0 {
			name, val, hasVal = name[:k], name[k+1:], true
		}
		fl := fs.Lookup(name)
		if fl == nil {
			continue // Parse reports it
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil // Parse reports the missing value
			}
			i++
			val = args[i]
		}
		g, ok := fl.Value.(flag.Getter)
		if !ok {
			continue
		}
		bad := ""
		switch g.Get().(type) {
		case int, int64:
			if !units.Digits(strings.TrimPrefix(val, "-")) {
				bad = "want a decimal integer"
			}
		case uint, uint64:
			if !units.Digits(val) {
				bad = "want a non-negative decimal integer"
			}
		case float64:
			f, err := strconv.ParseFloat(val, 64)
			switch {
			case err != nil || strings.ContainsAny(val, "xX_"):
				bad = "want a decimal number"
			case math.IsNaN(f) || math.IsInf(f, 0):
				bad = "want a finite number"
			}
		}
		if bad != "" {
			return fmt.Errorf("invalid value %q for flag -%s: %s", val, name, bad)
		}
	}
	return nil
}

// chatTokenizer loads the tokenizer of a chat command (from tokDir, or the
// model folder when it is empty) and checks it has the chat format's
// special tokens; a code >= 0 is the exit code after the message.
func chatTokenizer(cmd, dir, tokDir string, stderr io.Writer) (*tokenizer.Tokenizer, int) {
	if tokDir == "" {
		tokDir = dir
	}
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		fmt.Fprintf(stderr, "k3 %s: tokenizer: %v\n", cmd, err)
		return nil, ExitUsage
	}
	if err := tok.CheckChat(); err != nil {
		fmt.Fprintf(stderr, "k3 %s: %v\n", cmd, err)
		return nil, ExitUsage
	}
	return tok, -1
}

// chatOnlyFlags are k3 chat's flags that k3 run has not (the C engine's
// chat flags among them, which it refused without --chat): k3 run names
// k3 chat for them instead of calling them unknown.
var chatOnlyFlags = []string{"system", "history", "temperature", "top-p", "top-k", "seed", "greedy", "no-think", "thinking-effort", "json", "json-schema"}

// cAliases are the C engine's flag names for flags k3 spells otherwise.
var cAliases = map[string]string{"tf-check": "teacher-forcing"}

// cSpellings rewrites the C engine's spellings that mean the same in k3
// (--tf-check is --teacher-forcing, --trunk-gb auto is --preset auto,
// --incremental is what k3 always does: dropped with a note) and refuses
// an unknown flag in one line naming the closest known one.
func cSpellings(fs *flag.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		if len(a) < 2 || a[0] != '-' || a == "-" {
			out = append(out, a)
			continue
		}
		dashes := "-"
		if strings.HasPrefix(a, "--") {
			dashes = "--"
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		switch name {
		case "h", "help":
			out = append(out, a)
			continue
		}
		if fs.Lookup(name) == nil {
			switch to, ok := cAliases[name]; {
			case strings.HasPrefix(name, "draft-trunk"):
				return nil, fmt.Errorf("%s%s is the C engine's draft made from the model's own trunk; k3 drafts with a draft model instead: --draft DIR (k3 download DEST --draft fetches the released one)", dashes, name)
			case ok && fs.Lookup(to) != nil:
				name = to
				a = dashes + to
				if hasVal {
					a += "=" + val
				}
			case name == "incremental" && fs.Lookup("recompute") != nil:
				fmt.Fprintf(fs.Output(), "note: --incremental is how k3 always runs (the state is carried from step to step; --recompute turns it off): ignored\n")
				continue
			case fs.Name() == "run" && slices.Contains(chatOnlyFlags, name):
				return nil, fmt.Errorf("%s%s is a flag of k3 chat, not of k3 run: k3 run reads the prompt as it is (no chat template, no thinking) and decodes greedily; for a conversation: k3 chat MODEL_DIR %s%s (or add --chat, as with the C engine)", dashes, name, dashes, name)
			case name == "incremental" && fs.Name() == "chat":
				fmt.Fprintf(fs.Output(), "note: --incremental is how k3 chat always runs (the state is carried from turn to turn): ignored\n")
				continue
			default:
				return nil, fmt.Errorf("unknown flag %s%s%s", dashes, name, closestFlag(fs, name))
			}
		}
		fl := fs.Lookup(name)
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() || hasVal {
			if name == "trunk-gb" && val == "auto" && fs.Lookup("preset") != nil {
				out = append(out, "--preset=auto")
				continue
			}
			out = append(out, a)
			continue
		}
		if i+1 < len(args) {
			if name == "trunk-gb" && args[i+1] == "auto" && fs.Lookup("preset") != nil {
				out = append(out, "--preset=auto")
				i++
				continue
			}
			out = append(out, a, args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// otherNames are other programs' names for k3's flags (OpenAI's, llama.cpp's
// and Ollama's reply cap), which closestFlag names before any spelling.
var otherNames = map[string]string{"max-tokens": "gen", "max-new-tokens": "gen", "n-predict": "gen", "num-predict": "gen"}

// closestFlag is ", the closest is --NAME (k3 CMD -h lists them)" for the
// flag of fs that another program calls name, or else the accepted spelling
// (a flag of fs, or a C engine alias fs takes) nearest to name in edit
// distance, if it is near enough to be a typo of it: a flag further away has
// another meaning (--draft-trunk-gb is no misspelt --trunk-gb).
func closestFlag(fs *flag.FlagSet, name string) string {
	if to, ok := otherNames[name]; ok && fs.Lookup(to) != nil {
		return fmt.Sprintf("; the closest is --%s (%s -h lists them all)", to, progName(fs))
	}
	best, bestD := "", 0
	for _, s := range spellings(fs) {
		if d := editDistance(name, s); best == "" || d < bestD {
			best, bestD = s, d
		}
	}
	switch {
	case best == "":
		return fmt.Sprintf(" (%s takes no flags)", progName(fs))
	case !typoDistance(name, bestD):
		return fmt.Sprintf(" (%s -h lists them all)", progName(fs))
	}
	return fmt.Sprintf("; the closest is --%s (%s -h lists them all)", best, progName(fs))
}

// spellings are the flag names fs accepts: its own, and the C engine's
// aliases for them (cSpellings), sorted.
func spellings(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for from, to := range cAliases {
		if fs.Lookup(to) != nil {
			names = append(names, from)
		}
	}
	if fs.Lookup("recompute") != nil || fs.Name() == "chat" {
		names = append(names, "incremental")
	}
	slices.Sort(names)
	return names
}

// typoDistance reports whether d edits of a name could be a typo: at most
// one edit in three letters, and at most 3.
func typoDistance(name string, d int) bool {
	return d <= 3 && 3*d <= len(name)
}

// progName is "k3 run" for a FlagSet named "run" (bench's are named in
// full: "k3 bench layer").
func progName(fs *flag.FlagSet) string {
	if strings.HasPrefix(fs.Name(), "k3 ") {
		return fs.Name()
	}
	return "k3 " + fs.Name()
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
