package measure

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/synth"
)

// smallLayerCheckpoint is the layer benchmark's checkpoint at the small
// test width, with its packed trunk.
func smallLayerCheckpoint(t *testing.T) (model, tr string) {
	t.Helper()
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	model, tr, err := PrepareLayer(context.Background(), t.TempDir(), spec, t.Logf)
	require.NoError(t, err)
	return model, tr
}

// TestOverlapMeasured: a streamed decode's read time, compute time and
// their overlap come from the run's own counters; the efficiency is a
// share of the wall time.
func TestOverlapMeasured(t *testing.T) {
	model, tr := smallLayerCheckpoint(t)
	runs, err := TrunkRuns(tr)
	require.NoError(t, err)
	m, err := engine.Open(model, engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: MinRing(runs, 2), Ring: 2, CacheBytes: 1}, Chunk: 16})
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(2)
	defer e.Close()
	o, err := MeasureOverlap(context.Background(), e, []int{5, 77, 300, 12}, 3)
	require.NoError(t, err)
	assert.Equal(t, 3, o.Tokens)
	assert.Greater(t, o.ReadSeconds, 0.0)
	assert.Greater(t, o.ComputeSeconds, 0.0)
	assert.Greater(t, o.BytesRead, int64(0))
	assert.Greater(t, o.Efficiency, 0.0)
	assert.LessOrEqual(t, o.Efficiency, 1.0)
	assert.InDelta(t, max(o.ReadSeconds, o.ComputeSeconds)/3, o.BoundSecondsPerToken(), 1e-12)

	d := engine.Stats{ReadBusySeconds: 3, TrunkWaitSeconds: 1, Expert: engine.ExpertStats{ReadSeconds: 1, BytesRead: 10}, TrunkBytesRead: 5}
	o = OverlapOf(d, 5, 2)
	assert.Equal(t, Overlap{Tokens: 2, WallSeconds: 5, ReadSeconds: 3, ComputeSeconds: 3, BytesRead: 15, Efficiency: 0.6}, o)
	assert.Equal(t, 2.5, o.SecondsPerToken())
}

// TestMeasurePasses: a timing per pass length, every layer kind of the
// checkpoint timed, the routed experts' time per row and the rest of the
// pass; the projection adds each kind's layers, the rows of every position
// and the rest.
func TestMeasurePasses(t *testing.T) {
	model, _ := smallLayerCheckpoint(t)
	var logged []string
	ts, err := MeasurePasses(context.Background(), model, 1, 4, 8, 2, func(f string, a ...any) { logged = append(logged, f) })
	require.NoError(t, err)
	require.Len(t, ts, 4)
	assert.Len(t, logged, 4)
	for i, p := range ts {
		assert.Equal(t, i+1, p.T)
		assert.ElementsMatch(t, []string{"kda+dense", "kda+moe", "mla+moe"}, slices.Collect(maps.Keys(p.Layers)), "T=%d", p.T)
		for k, s := range p.Layers {
			assert.Positive(t, s, "T=%d %s", p.T, k)
		}
		assert.Positive(t, p.ExpertRow, "T=%d", p.T)
	}
	layers := map[string]int{"kda+dense": 1, "kda+moe": 2, "mla+moe": 3}
	c := ComputeAt(ts, layers, 5, 4)
	require.Len(t, c, 5)
	assert.Zero(t, c[0])
	for T := 1; T <= 4; T++ {
		p := ts[T-1]
		want := p.Rest + float64(T*5*4)*ts[0].ExpertRow + p.Layers["kda+dense"] + 2*p.Layers["kda+moe"] + 3*p.Layers["mla+moe"]
		assert.InDelta(t, want, c[T], 1e-12, "T=%d", T)
	}
}
