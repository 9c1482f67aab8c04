package cli

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor/measure"
)

// TestBenchUsage: every bench names its usage on --help (exit 0), and a bad
// flag in one line with the closest known one (exit 2), without measuring
// anything.
func TestBenchUsage(t *testing.T) {
	for _, what := range []string{"compress", "kernels", "layer", "stream", "vision"} {
		var out, errb bytes.Buffer
		require.Equal(t, ExitOK, run([]string{"bench", what, "--help"}, &out, &errb), "bench %s --help", what)
		assert.True(t, strings.HasPrefix(out.String(), "usage: k3 bench "+what+" ["), "bench %s --help printed %q", what, out.String())
		assert.Empty(t, errb.String())
		out.Reset()
		errb.Reset()
		require.Equal(t, ExitUsage, run([]string{"bench", what, "--bogus"}, &out, &errb), "bench %s --bogus", what)
		assert.Equal(t, "k3 bench "+what+": unknown flag --bogus (k3 bench "+what+" -h lists them all)\n", errb.String())
		assert.Empty(t, out.String())
	}
}

// TestBenchList: `k3 bench --help` lists the benchmarks on stdout, a bare
// `k3 bench` on stderr with exit 2, and an unknown one is refused by name.
func TestBenchList(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, run([]string{"bench", "--help"}, &out, &errb))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 8)
	assert.Equal(t, "usage: k3 bench WHAT [flags]", lines[0])
	for i, name := range []string{"compress", "kernels", "layer", "prefill", "spec", "stream", "vision"} {
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

// TestBenchKernelsPeer: the help names --peer and --batch-only; a peer that
// is not there is refused (exit 2) before anything is measured.
func TestBenchKernelsPeer(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, run([]string{"bench", "kernels", "--help"}, &out, &errb))
	assert.Contains(t, out.String(), "[--peer PATH] [--batch-only] [--reps N]")
	assert.Contains(t, out.String(), "docs/BENCHMARKS.md says how to build test-backend-ops")
	out.Reset()
	errb.Reset()
	require.Equal(t, ExitUsage, run([]string{"bench", "kernels", "--peer", filepath.Join(t.TempDir(), "nope")}, &out, &errb))
	assert.Contains(t, errb.String(), "k3 bench kernels: measure: peer:")
	assert.Empty(t, out.String())
}

// TestWriteBatchTable: one row per shape and T, the peer columns only with
// a peer.
func TestWriteBatchTable(t *testing.T) {
	r := measure.BatchResult{DType: "bf16", Rows: 4096, Cols: 7168, Tokens: 8, Threads: 2, Reps: 3,
		GFLOPs: 60.25, GFLOPsMin: 58, GFLOPsMax: 61.5, Roofline: 90, Fraction: 60.25 / 90}
	var b bytes.Buffer
	writeBatchTable(&b, []measure.BatchResult{r})
	assert.Equal(t, "\nsmall batches: 2 threads, median of 3 interleaved repeats [min-max]; roofline = float64 FMA peak of 2 threads measured next to each\n"+
		"dtype  shape        T               k3 GFLOP/s  roofline of roof\n"+
		"bf16   4096x7168    8         60.2 [58.0-61.5]      90.0   0.669\n", b.String())
	r.Peer, r.PeerThreads, r.PeerGFLOPs, r.PeerMin, r.PeerMax, r.RatioToPeer = "ggml test-backend-ops", 2, 80, 75, 90, 60.25/80
	b.Reset()
	writeBatchTable(&b, []measure.BatchResult{r})
	lines := strings.Split(b.String(), "\n")
	require.Len(t, lines, 6)
	assert.Equal(t, "peer: ggml test-backend-ops on 2 threads (float32 arithmetic, not exact)", lines[2])
	assert.Equal(t, "bf16   4096x7168    8         60.2 [58.0-61.5]      90.0   0.669         80.0 [75.0-90.0]   0.753", lines[4])
	b.Reset()
	writeBatchTable(&b, nil)
	assert.Empty(t, b.String())
}
