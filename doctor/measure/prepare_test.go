package measure

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
)

// TestPrepareReleasesGenerator: generating the benchmark's checkpoint
// leaves its memory returned to the system, so the measurements after it
// see the machine's memory (a first k3 bench layer on a 24 GB machine kept
// ~14 GB of the generator and refused its own measurement). Scaled down:
// model tables of 2 x 32 MB as float32.
func TestPrepareReleasesGenerator(t *testing.T) {
	spec := synth.Small()
	spec.Vocab, spec.Hidden, spec.Layers, spec.FullAttn = 32768, 256, 2, []int{2}
	var released []string
	logf := func(f string, a ...any) {
		t.Logf(f, a...)
		if len(f) > 8 && f[:8] == "released" {
			released = append(released, f)
		}
	}
	before := heapHeld()
	_, _, err := PrepareLayer(context.Background(), t.TempDir(), spec, logf)
	require.NoError(t, err)
	assert.Len(t, released, 1, "the generator's memory is released once")
	// the generation made ~100 MB of garbage; what the heap still holds
	// from the system is no more than before it, give or take the packer's
	// buffers' bookkeeping
	assert.Less(t, heapHeld()-before, int64(24<<20), "heap held after preparing")
}
