package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor/bench"
	"k3/engine/plan"
	"k3/engine/synth"
)

// TestBenchPrefillJSON runs `k3 bench prefill --json` on a small
// checkpoint: the prompt read in one pass gives chunk 64's output bit for
// bit, reads fewer bytes per position in fewer passes, and every preset
// has a projection whose plan's chunk reads each prompt in no more passes
// (no more bytes) than chunk 64. No timing is asserted beyond being
// positive.
func TestBenchPrefillJSON(t *testing.T) {
	if raceEnabled {
		t.Skip("a benchmark's numbers, checked in the plain run (see raceEnabled)")
	}
	defer func(f func() synth.Spec) { benchPrefillSpec = f }(benchPrefillSpec)
	benchPrefillSpec = func() synth.Spec {
		s := synth.Small()
		s.Layers, s.FullAttn = 3, []int{3}
		return s
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "prefill", "--json", "--dir", t.TempDir(), "--threads", "1", "--positions", "200", "--disk-gbps", "3"}, &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	var rep bench.PrefillReport
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Len(t, rep.Runs, 2)
	at64, one := rep.Runs[0], rep.Runs[1]
	assert.Equal(t, 64, at64.Chunk)
	assert.Equal(t, 4, at64.Passes)
	assert.Equal(t, 200, one.Chunk)
	assert.Equal(t, 1, one.Passes)
	assert.True(t, one.IdenticalOutput)
	assert.Less(t, one.BytesPerPos, at64.BytesPerPos/2, "a quarter of the passes")
	assert.Positive(t, one.SecondsPerPos)
	assert.Positive(t, rep.ComputePerPos)
	assert.Equal(t, 3.0, rep.DiskGBps)
	require.Len(t, rep.Projections, len(plan.Presets))
	for _, pj := range rep.Projections {
		require.Len(t, pj.AtPlan, len(bench.PrefillLengths))
		for i, n := range bench.PrefillLengths {
			a, b := pj.At64[i], pj.AtPlan[i]
			assert.Equal(t, (n+63)/64, a.Passes, pj.Preset)
			require.Positive(t, b.Chunk, "%s fits %v GB", pj.Preset, pj.MemoryGB)
			assert.LessOrEqual(t, b.Passes, a.Passes, pj.Preset)
			assert.LessOrEqual(t, b.Bytes, a.Bytes, pj.Preset)
			assert.LessOrEqual(t, b.Seconds, a.Seconds, pj.Preset)
		}
		assert.Equal(t, 1, pj.AtPlan[0].Passes, "%s: a 100-position prompt in one pass", pj.Preset)
	}
}
