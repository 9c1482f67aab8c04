package cli

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchUsage: every bench names its usage on --help (exit 0) and on a
// bad flag (exit 2), without measuring anything.
func TestBenchUsage(t *testing.T) {
	for _, what := range []string{"compress", "kernels", "layer", "stream"} {
		var out, errb bytes.Buffer
		require.Equal(t, ExitOK, run([]string{"bench", what, "--help"}, &out, &errb), "bench %s --help", what)
		assert.True(t, strings.HasPrefix(errb.String(), "usage: k3 bench "+what+" ["), "bench %s --help printed %q", what, errb.String())
		out.Reset()
		errb.Reset()
		require.Equal(t, ExitUsage, run([]string{"bench", what, "--bogus"}, &out, &errb), "bench %s --bogus", what)
		assert.Contains(t, errb.String(), "usage: k3 bench "+what)
		assert.Empty(t, out.String())
	}
}

// TestBenchList: `k3 bench --help` lists the benchmarks on stdout, a bare
// `k3 bench` on stderr with exit 2, and an unknown one is refused by name.
func TestBenchList(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, run([]string{"bench", "--help"}, &out, &errb))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 6)
	assert.Equal(t, "usage: k3 bench WHAT [flags]", lines[0])
	for i, name := range []string{"compress", "kernels", "layer", "spec", "stream"} {
		assert.True(t, strings.HasPrefix(lines[i+1], "  "+name+strings.Repeat(" ", 11-len(name))), "%q", lines[i+1])
	}
	out.Reset()
	require.Equal(t, ExitUsage, run([]string{"bench"}, &out, &errb))
	assert.Empty(t, out.String())
	errb.Reset()
	require.Equal(t, ExitUsage, run([]string{"bench", "nope"}, &out, &errb))
	assert.Equal(t, "k3 bench: unknown benchmark \"nope\" (run 'k3 bench --help')\n", errb.String())
}

// TestRegistry: one type lists, dispatches and refuses for both levels.
func TestRegistry(t *testing.T) {
	r := newRegistry("k3 x", "no %q here", 4)
	var got []string
	r.add("b", "second", func(args []string, stdout, stderr io.Writer) int { got = args; return 7 })
	r.add("a", "first", func([]string, io.Writer, io.Writer) int { return 0 })
	assert.Panics(t, func() { r.add("a", "again", nil) })
	var out, errb bytes.Buffer
	r.list(&out)
	assert.Equal(t, "  a    first\n  b    second\n", out.String())
	assert.Equal(t, 7, r.dispatch([]string{"b", "1", "2"}, &out, &errb))
	assert.Equal(t, []string{"1", "2"}, got)
	assert.Equal(t, ExitUsage, r.dispatch([]string{"c"}, &out, &errb))
	assert.Equal(t, "k3 x: no \"c\" here\n", errb.String())

	out.Reset()
	require.Equal(t, ExitOK, run([]string{"--help"}, &out, &errb))
	assert.Contains(t, out.String(), "\n  bench        measure this machine and the engine (k3 bench kernels|...)\n")
	errb.Reset()
	require.Equal(t, ExitUsage, run([]string{"nope"}, &out, &errb))
	assert.Equal(t, "k3: unknown command \"nope\" (run 'k3 --help' for the list)\n", errb.String())
}
