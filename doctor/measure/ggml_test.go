package measure

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
)

// TestParseGGMLPerf reads the recorded output of a real test-backend-ops
// perf run (testdata/ggml): the two MUL_MAT lines with their names and
// times, the device and summary lines ignored.
func TestParseGGMLPerf(t *testing.T) {
	out, err := os.ReadFile(fixture.Path("ggml", "perf-mul-mat.txt"))
	require.NoError(t, err)
	res, err := ParseGGMLPerf(out)
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, GGMLPerf{Name: "k3-bf16-4096x7168-t8", Supported: true, Runs: 146, MicrosPerRun: 20523.54,
		Params: "name=k3-bf16-4096x7168-t8,type=f32,ne=[4096,8,1,1],op_params=[],sources=bf16[7168,4096,1,1],f32[7168,8,1,1]"}, res[0])
	assert.Equal(t, "k3-mxfp4-4096x7168-t8", res[1].Name)
	assert.Equal(t, 539, res[1].Runs)
	assert.Equal(t, 18073.04, res[1].MicrosPerRun)

	res, err = ParseGGMLPerf([]byte("  MUL_MAT(name=x,type=f32): not supported\n  MUL_MAT(type_a=q4_0,n=1):   10 runs -    5.00 us/run - 1 GFLOP/run\n"))
	require.NoError(t, err)
	assert.Equal(t, []GGMLPerf{{Name: "x", Params: "name=x,type=f32"}, {Params: "type_a=q4_0,n=1", Supported: true, Runs: 10, MicrosPerRun: 5}}, res)
	_, err = ParseGGMLPerf([]byte("  MUL_MAT(name=x):   10 runs -    0.00 us/run\n"))
	assert.ErrorContains(t, err, "bad time")

	probe, err := os.ReadFile(fixture.Path("ggml", "perf-probe.txt"))
	require.NoError(t, err)
	op, err := ParseGGMLProbe(probe)
	require.NoError(t, err)
	assert.Equal(t, 29, op)
	_, err = ParseGGMLProbe(out)
	assert.ErrorContains(t, err, "no MUL_MAT")
}

// TestGGMLLine: the test-file line of a shape is the one the recorded run
// was made with.
func TestGGMLLine(t *testing.T) {
	assert.Equal(t, "29 0 4096 8 1 1 0 2 30 7168 4096 1 1 2 14336 58720256 58720256 0 7168 8 1 1 4 28672 229376 229376 k3-bf16-4096x7168-t8\n",
		ggmlLine(29, kernels.BF16, 4096, 7168, 8, "k3-bf16-4096x7168-t8"))
	assert.Equal(t, "29 0 4096 8 1 1 0 2 39 7168 4096 1 1 17 3808 15597568 15597568 0 7168 8 1 1 4 28672 229376 229376 k3-mxfp4-4096x7168-t8\n",
		ggmlLine(29, kernels.MXFP4, 4096, 7168, 8, "k3-mxfp4-4096x7168-t8"))
}

// TestGGMLPeer runs the peer against a stand-in for test-backend-ops that
// prints the recorded outputs: the probe finds MUL_MAT's number, a
// measurement turns the recorded time into GFLOP/s, a shape without a
// result and a failing binary are errors.
func TestGGMLPeer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is a shell script")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "test-backend-ops")
	script := "#!/bin/sh\n[ \"$1 $2 $3 $4 $5 $6\" = \"perf -o MUL_MAT -b CPU --test-file\" ] || exit 3\n" +
		"if grep -q k3-probe \"$7\"; then cat " + fixture.Path("ggml", "perf-probe.txt") + "; else cat " + fixture.Path("ggml", "perf-mul-mat.txt") + "; fi\n"
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	g, err := NewGGML(context.Background(), bin)
	require.NoError(t, err)
	defer g.Close()
	assert.Equal(t, 29, g.op)
	assert.Equal(t, runtime.NumCPU(), g.Threads())
	gf, err := g.MatMul(context.Background(), Shape{kernels.MXFP4, 4096, 7168}, 8)
	require.NoError(t, err)
	assert.InDelta(t, 2*4096*7168*8/18073.04e-6/1e9, gf, 1e-9)
	_, err = g.MatMul(context.Background(), Shape{kernels.BF16, 4096, 7168}, 2)
	assert.ErrorContains(t, err, "no result for k3-bf16-4096x7168-t2")

	_, err = NewGGML(context.Background(), filepath.Join(dir, "missing"))
	assert.Error(t, err)
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755))
	_, err = NewGGML(context.Background(), bin)
	assert.ErrorContains(t, err, "broken")
}
