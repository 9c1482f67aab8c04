package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
)

// helpFlags are the flag names a command's -h lists (on stdout).
func helpFlags(t *testing.T, cmd ...string) []string {
	t.Helper()
	code, out, errs := runK3(append(cmd, "-h")...)
	require.Equal(t, ExitOK, code, errs)
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	require.NotEmpty(t, names, out)
	return names
}

// TestRunNamesChatFlags: k3 chat's flags given to k3 run (the C engine's
// --no-think, --thinking-effort, --temperature ... without --chat) are
// refused in one line naming k3 chat, exit 2, not called unknown; the list
// is every flag k3 chat has and k3 run has not.
func TestRunNamesChatFlags(t *testing.T) {
	run, chat := helpFlags(t, "run"), helpFlags(t, "chat")
	var only []string
	for _, f := range chat {
		if !slices.Contains(run, f) {
			only = append(only, f)
		}
	}
	slices.Sort(only)
	want := slices.Clone(chatOnlyFlags)
	slices.Sort(want)
	assert.Equal(t, only, want, "chatOnlyFlags is k3 chat's flags less k3 run's")

	for _, c := range []struct {
		args []string
		flag string // the first chat flag on the line
	}{
		{[]string{"run", tinyRelease, "--ids", "1,2", "--no-think", "--thinking-effort", "low"}, "no-think"},
		{[]string{"run", tinyRelease, "--ids", "1,2", "--thinking-effort", "low"}, "thinking-effort"},
		{[]string{tinyRelease, "--ids", "1,2", "--temperature", "0.5"}, "temperature"},
		{[]string{"run", tinyRelease, "--ids", "1,2", "--top-p=0.9"}, "top-p"},
	} {
		code, out, errs := runK3(c.args...)
		assert.Equal(t, ExitUsage, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Contains(t, errs, "k3 run: --"+c.flag+" is a flag of k3 chat, not of k3 run: k3 run reads the prompt as it is (no chat template, no thinking) and decodes greedily; for a conversation: k3 chat MODEL_DIR --"+c.flag, c.args)
		assert.NotContains(t, errs, "unknown flag", c.args)
	}
	// k3 serve has no such flag either, but no k3 run line to correct
	code, _, errs := runK3("serve", tinyRelease, "--no-think")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "unknown flag --no-think")
}

// TestBadValueOneLine: a value out of range or not a number, or a flag
// without its value, is one line naming the flag and exit 2, not the line
// followed by the whole usage (61 lines for k3 run).
func TestBadValueOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run", tinyRelease, "--ids", "1", "--gen", "x"}, `k3 run: invalid value "x" for flag -gen: want a decimal integer (k3 run -h lists the flags)`},
		{[]string{"run", tinyRelease, "--ids", "1", "--gen", "-1"}, "k3 run: --gen -1 is outside 0..1048576"},
		{[]string{"run", tinyRelease, "--ids", "1", "--gen"}, "k3 run: flag needs an argument: -gen (k3 run -h lists the flags)"},
		{[]string{"run", tinyRelease, "--ids", "1", "--threads", "-1"}, "k3 run: --threads -1 must be 0 (one per physical core) or more"},
		{[]string{"run", tinyRelease, "--ids", "1", "--chunk", "0"}, "k3 run: --chunk 0: give 1..1048576 prompt positions per pass"},
		{[]string{"run", tinyRelease, "--ids", "1", "--stop-id", "x"}, `k3 run: invalid value "x" for flag -stop-id`},
		{[]string{"chat", tinyRelease, "--seed", "-1"}, `k3 chat: invalid value "-1" for flag -seed: want a non-negative decimal integer (k3 chat -h lists the flags)`},
		{[]string{"chat", tinyRelease, "--temperature", "-1"}, "k3 chat: --temperature -1: give 0 (greedy) or more"},
		{[]string{"chat", tinyRelease, "--top-p", "2"}, "k3 chat: --top-p 2: give 0..1 (0: off)"},
		{[]string{"chat", tinyRelease, "--gen", "0"}, "k3 chat: --gen 0: the turn cap must be 1 or more tokens"},
		{[]string{"serve", tinyRelease, "--threads", "x"}, `k3 serve: invalid value "x" for flag -threads`},
	} {
		code, out, errs := runK3(c.args...)
		assert.Equal(t, ExitUsage, code, c.args)
		assert.Empty(t, out, c.args)
		assert.Equal(t, 1, strings.Count(errs, "\n"), "%v: one line, got %q", c.args, errs)
		assert.True(t, strings.HasPrefix(errs, c.msg), "%v: %q", c.args, errs)
	}
}

var usageLine = regexp.MustCompile(`(?mi)^usage`)

// firstFlag is the first flag name a usage lists ("" when none).
func firstFlag(usage string) string {
	if m := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindStringSubmatch(usage); m != nil {
		return m[1]
	}
	return "\x00"
}

// TestHelpOnStdoutAnywhere: every command's -h, --help or -help prints its
// usage once on stdout (`k3 run --help | less` shows it; half of them
// printed it on stderr), exit 0, nothing on stderr; and, as in the C
// engine, a help flag anywhere on the line wins over a bad value before it.
func TestHelpOnStdoutAnywhere(t *testing.T) {
	for name := range commands.cmds {
		for _, h := range []string{"-h", "--help", "-help"} {
			code, out, errs := runK3(name, h)
			assert.Equal(t, ExitOK, code, name+" "+h)
			assert.Empty(t, errs, name+" "+h)
			assert.NotEmpty(t, out, name+" "+h)
			assert.LessOrEqual(t, len(usageLine.FindAllString(out, -1)), 1, "%s %s printed its usage more than once:\n%s", name, h, out)
			assert.LessOrEqual(t, strings.Count(out, "  -"+firstFlag(out)+" "), 1, "%s %s printed its flags more than once:\n%s", name, h, out)
		}
	}
	for _, c := range []struct {
		args  []string
		usage string
	}{
		{[]string{"run", tinyRelease, "--gen", "x", "--help"}, "usage: k3 run MODEL_DIR"},
		{[]string{tinyRelease, "--ids", "1", "-h"}, "usage: k3 run MODEL_DIR"},
		{[]string{"bench", "layer", "--rounds", "x", "--help"}, "usage: k3 bench layer"},
		{[]string{"cache", "list", "-h"}, "usage: k3 cache"},
	} {
		code, out, errs := runK3(c.args...)
		assert.Equal(t, ExitOK, code, c.args)
		assert.True(t, strings.HasPrefix(out, c.usage), "%v: %q", c.args, out)
		assert.NotContains(t, errs, "usage", c.args)
	}
	// after "--" it is an argument, not the help
	assert.Nil(t, helpLine([]string{"run", "DIR", "--", "-h"}))
	assert.Equal(t, []string{"bench", "layer", "-h"}, helpLine([]string{"bench", "layer", "--rounds", "x", "--help"}))
}

// TestOutFolderMissingSaid: --out in a folder that does not exist is exit 3
// with the folder named, not the name of the probe file k3 tried.
func TestOutFolderMissingSaid(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	code, _, errs := runK3("run", tinyRelease, "--ids", "1,2", "--gen", "1", "--out", filepath.Join(missing, "r.json"))
	assert.Equal(t, ExitOutput, code)
	assert.Equal(t, "k3 run: cannot write "+filepath.Join(missing, "r.json")+": the folder "+missing+": no such file or directory\n", errs)
}

// TestInterruptWhileLoadingEndsAtOnce: a Ctrl-C while the model loads ends
// k3 at once with exit 5 and writes no report (as the C engine, which was
// killed), instead of binding the rest of the trunk first.
func TestInterruptWhileLoadingEndsAtOnce(t *testing.T) {
	exited := make(chan int, 1)
	exitNow = func(code int) { exited <- code }
	started, release := make(chan struct{}), make(chan struct{})
	openModel = func(*modelFlags, string, engine.Options, io.Writer, io.Writer) (*engine.Model, int) {
		close(started)
		<-release
		return nil, ExitInterrupted
	}
	defer func() { exitNow, openModel = os.Exit, (*modelFlags).open }()

	out := filepath.Join(t.TempDir(), "r.json")
	var o, e bytes.Buffer
	c, code := parseRun([]string{tinyRelease, "--ids", "1,2", "--out", out}, &o, &e)
	require.Equal(t, -1, code, e.String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- c.run(ctx, &o, &e) }()
	<-started
	cancel() // the first Ctrl-C
	assert.Equal(t, ExitInterrupted, <-exited, "exit at once, the load still in flight")
	close(release)
	<-done
	assert.Contains(t, e.String(), "k3 run: interrupted while loading the model: nothing was run, no report written")
	assert.NoFileExists(t, out)
}

// TestInterruptAfterLoadingRuns: a Ctrl-C after the model has loaded is the
// run's (stop before the next layer, write the report), never the
// loading's exit, even when the loading's watcher first runs after both:
// with one P a new goroutine runs only when this one yields.
func TestInterruptAfterLoadingRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	exited := make(chan int, 100)
	exitNow = func(code int) { exited <- code }
	openModel = func(*modelFlags, string, engine.Options, io.Writer, io.Writer) (*engine.Model, int) {
		return nil, ExitRuntime
	}
	defer func() { exitNow, openModel = os.Exit, (*modelFlags).open }()
	var o, e bytes.Buffer
	c, code := parseRun([]string{tinyRelease, "--ids", "1,2", "--out="}, &o, &e)
	require.Equal(t, -1, code, e.String())
	for range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		_, code := c.openWatched(ctx, &o, &e)
		require.Equal(t, ExitRuntime, code)
		cancel()
		for range 4 {
			runtime.Gosched()
		}
	}
	assert.Empty(t, exited, "exited for a Ctrl-C after the load")
	assert.NotContains(t, e.String(), "interrupted while loading")
}
