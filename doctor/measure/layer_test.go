package measure

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/synth"
)

// TestLayerSmall runs the layer benchmark's code on a small checkpoint:
// every layer gets a time and a byte count, streamed reads really happen,
// and the limits are the best of the measurements before and after.
func TestLayerSmall(t *testing.T) {
	defer func(b int, d time.Duration) { layerRAMBytes, layerRAMTime = b, d }(layerRAMBytes, layerRAMTime)
	layerRAMBytes, layerRAMTime = 64<<20, 100*time.Millisecond
	dir := t.TempDir()
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	model, tr, err := PrepareLayer(context.Background(), dir, spec, t.Logf)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "layer"), filepath.Dir(model))
	r, err := Layer(context.Background(), model, tr, 1, 2, t.Logf)
	require.NoError(t, err)
	require.Len(t, r.Resident, 3)
	require.Len(t, r.Streamed, 3)
	assert.Positive(t, r.RAMGBps)
	assert.Positive(t, r.DiskGBps)
	assert.Positive(t, r.PrefillTokensPerS)
	assert.Equal(t, 64, r.PrefillTokens)
	assert.Equal(t, 1, r.Threads)
	assert.Equal(t, 1, r.StreamRingSlots, "streamed through one ring slot")

	require.Len(t, r.RAMRuns, 2)
	assert.Equal(t, max(r.RAMRuns[0], r.RAMRuns[1]), r.RAMGBps)
	nc := len(limitReads)
	require.Len(t, r.DiskRuns, 2*nc)
	best := 0.0
	for i, d := range r.DiskRuns {
		c := limitReads[i%nc]
		assert.Equal(t, []string{"before", "after"}[i/nc], d.When, "disk run %d", i)
		assert.Equal(t, c.QD, d.QD, "disk run %d", i)
		assert.Equal(t, c.Request, d.Request, "disk run %d", i)
		assert.Positive(t, d.Bytes, "disk run %d", i)
		assert.Equal(t, r.DiskRuns[0].Bytes, d.Bytes, "every run reads the same shards")
		best = max(best, d.GBps)
	}
	assert.Equal(t, best, r.DiskGBps)

	kinds := []string{"kda+dense", "kda+moe", "mla+moe"}
	for i, l := range r.Resident {
		s := r.Streamed[i]
		assert.Equal(t, LayerTiming{Layer: i, Kind: kinds[i], Bytes: l.Bytes, Seconds: l.Seconds, LimitSeconds: float64(l.Bytes) / (r.RAMGBps * 1e9)}, l)
		assert.Equal(t, LayerTiming{Layer: i, Kind: kinds[i], Bytes: l.Bytes, Seconds: s.Seconds, LimitSeconds: float64(l.Bytes) / (best * 1e9)}, s,
			"resident and streamed layers touch the same bytes")
		assert.Positive(t, l.Bytes)
		assert.Positive(t, l.Seconds)
		assert.Positive(t, s.Seconds)
	}
	// a layer's bytes are its trunk and, for MoE, its top-k experts: gate
	// and up (MoEInter x Latent) and down (Latent x MoEInter), MXFP4 at
	// half a byte a weight and one scale byte per 32
	m, err := engine.Open(model, engine.Options{})
	require.NoError(t, err)
	defer m.Close()
	trunkBytes := m.TrunkLayerBytes()
	expert := int64(3 * spec.MoEInter * spec.Latent * 17 / 32)
	for i, l := range r.Resident {
		want := trunkBytes[i]
		if i > 0 {
			want += int64(spec.TopK) * expert
		}
		assert.Equal(t, want, l.Bytes, "layer %d", i)
	}
}
