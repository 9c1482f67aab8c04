package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
	"k3/storage/atomicfile"
)

// goldenEnv, set to 1, rewrites the golden logits from this machine (do it
// on linux/amd64; every other platform and level must reproduce them).
const goldenEnv = "K3_WRITE_GOLDEN"

// goldenPath holds the teacher-forcing logits of prompt 1 of a reference
// checkpoint: every position's logits, little-endian float32, position
// after position, as linux/amd64 computed them.
func goldenPath(name string) string { return fixture.Path("golden", name+".logits.f32") }

// TestLogitsGolden is the cross-platform determinism check: the logits of
// the reference checkpoints are byte for byte the committed amd64 ones at
// every kernel level this machine runs (amd64: portable, AVX2, AVX-512;
// arm64: portable, NEON) and at 1 and 3 threads. The prompt is fed in
// chunks of 16 positions, so both the mat-mat path (16 tokens) and the row
// kernels (the last 4) run.
func TestLogitsGolden(t *testing.T) {
	for _, name := range fixture.Models {
		t.Run(name, func(t *testing.T) {
			m := openCase(t, name, 16)
			ids := fixture.LoadExpect(t, name).Prompts[1].FullIDs
			if os.Getenv(goldenEnv) == "1" {
				require.Equal(t, "amd64", runtime.GOARCH, "goldens are written on amd64")
				lg := goldenLogits(t, m, ids, kernels.BestLevel(), 2)
				require.NoError(t, atomicfile.Write(goldenPath(name), f32Bytes(lg)))
				t.Logf("wrote %s (%d logits)", goldenPath(name), len(lg))
			}
			raw, err := os.ReadFile(goldenPath(name))
			require.NoError(t, err, "golden logits missing: run with %s=1 on linux/amd64", goldenEnv)
			want := f32FromBytes(t, raw)
			require.Len(t, want, len(ids)*m.Cfg.VocabSize)
			for _, l := range kernels.Levels() {
				for _, threads := range []int{1, 3} {
					got := goldenLogits(t, m, ids, l, threads)
					requireSameBits(t, fmt.Sprintf("%s %s/%s %v threads=%d", name, runtime.GOOS, runtime.GOARCH, l, threads), got, want)
				}
			}
		})
	}
}

func goldenLogits(t *testing.T, m *Model, ids []int, l kernels.Level, threads int) []float32 {
	t.Helper()
	prev := kernels.SetLevel(l)
	defer kernels.SetLevel(prev)
	require.Equal(t, l, kernels.CurrentLevel())
	e := m.NewEngine(threads)
	defer e.Close()
	lg, err := e.Feed(context.Background(), m.NewState(), ids, true)
	require.NoError(t, err)
	for i, v := range lg {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "logit %d is %v", i, v)
	}
	return lg
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32FromBytes(t *testing.T, b []byte) []float32 {
	t.Helper()
	require.Zero(t, len(b)%4, "golden length")
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
