package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine/plan"
)

func TestOverlapCases(t *testing.T) {
	// a benchmark with a layer as large as the two others together: the
	// laptop ring (2.54 GB: two of K3's KDA layers) cannot hold it with its
	// successor, so the case gets the smallest ring that does
	runs := []int64{2.4e9, 1.2e9, 0.8e9}
	cases, by := overlapCases(runs)
	require.Len(t, cases, 3)
	lap := by["laptop"]
	c := cases[lap.index]
	assert.True(t, c.Streamed)
	assert.Equal(t, int64(3.6e9), c.Budget.TrunkBytes)
	assert.Equal(t, 2, c.Budget.Ring)
	assert.Equal(t, int64(1), c.Budget.CacheBytes)
	assert.Contains(t, lap.note, "measured with a 3.60 GB ring: the preset's 2.54 GB holds 2 benchmark layers at only 1 of its 3")
	assert.Equal(t, lap.index, by["desktop"].index)
	assert.Equal(t, lap.index, by["workstation"].index)
	assert.True(t, cases[by["ultra"].index].Budget.Ultra)
	assert.Contains(t, by["ultra"].note, "holds 2 layers in flight at 46 of its 93 streamed layers; at the other 47 a read waits for the layer before it")
	assert.Equal(t, measure.OverlapCase{Name: "trunk resident", Budget: cases[by["server"].index].Budget}, cases[by["server"].index])
	assert.Equal(t, by["server"].index, by["max"].index)
	// a ring that holds two at every layer, not all three, is the preset's own
	cases, by = overlapCases([]int64{1.2e9, 1.2e9, 1.2e9})
	assert.NotContains(t, by["laptop"].note, "measured with")
	assert.Equal(t, by["laptop"].plan.RingBytes, cases[by["laptop"].index].Budget.TrunkBytes)
	assert.Equal(t, 2*doctor.K3.LayerBytes[1]+2*plan.RingSlack, by["laptop"].plan.RingBytes, "laptop's ring: two KDA layers")
	// one that would hold them all is replaced by the smallest that streams
	cases, by = overlapCases([]int64{0.8e9, 0.8e9, 0.8e9})
	assert.Contains(t, by["laptop"].note, "measured with a 1.60 GB ring: the preset's 2.54 GB would hold the whole benchmark trunk")
	assert.Equal(t, int64(1.6e9), cases[by["laptop"].index].Budget.TrunkBytes)
}
