package measure

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
	"k3/storage/trunk"
)

// TestStreamSmall runs the stream benchmark on a small checkpoint: the raw
// measurements (each request size and depth, before and after), then the
// trunk, the experts and a decode, every ratio taken against the best raw
// rate.
func TestStreamSmall(t *testing.T) {
	model, tr, err := prepare(context.Background(), t.TempDir(), synth.Small(), t.Logf)
	require.NoError(t, err)
	res, err := Stream(context.Background(), model, tr, 2, t.Logf)
	require.NoError(t, err)
	nc := len(limitReads)
	var kinds []string
	for range 2 * nc {
		kinds = append(kinds, "raw")
	}
	kinds = append(kinds, "trunk", "experts", "decode")
	require.Len(t, res, len(kinds))
	best := 0.0
	for _, m := range res[:2*nc] {
		best = max(best, m.GBps)
	}
	notes := []string{"64 MiB requests at queue depth 1, before", "64 MiB requests at queue depth 2, before", "256 MiB requests at queue depth 1, before",
		"64 MiB requests at queue depth 1, after", "64 MiB requests at queue depth 2, after", "256 MiB requests at queue depth 1, after"}
	for i, m := range res {
		assert.Equal(t, kinds[i], m.Kind, "line %d", i)
		assert.Positive(t, m.Bytes, "line %d", i)
		assert.Positive(t, m.Seconds, "line %d", i)
		assert.Equal(t, best, m.RawGBps, "line %d", i)
		assert.Equal(t, m.GBps/best, m.Ratio, "line %d", i)
		if i < 2*nc {
			assert.Equal(t, notes[i], m.Note)
			// the raw lines read every shard
			assert.Equal(t, res[0].Bytes, m.Bytes, "raw byte counts differ")
		}
	}
	// the trunk line reads the whole packed trunk
	trk, err := trunk.Open(tr)
	require.NoError(t, err)
	defer trk.Close()
	var tb int64
	for i := 0; i < trk.Layers(); i++ {
		r, _ := trk.LayerRun(i)
		tb += r.Length
	}
	assert.Equal(t, tb, res[2*nc].Bytes)
	assert.Equal(t, "2 tokens at the smallest budgets; includes compute", res[len(res)-1].Note)
}
