package doctor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
)

// Issue 37: the prefill cost model. 64 positions pick 68% of a layer's
// 896 experts (the measured union), from about 800 nearly all; the plan's
// chunk at laptop on 16 GB reads a 100-position prompt in one pass where
// --chunk 64 takes two, and a 16K one with at least 8x fewer bytes.
func TestPrefillModel(t *testing.T) {
	assert.InDelta(t, 0.684, K3.ExpertUnion(64), 0.001)
	assert.Greater(t, K3.ExpertUnion(800), 0.9999)
	laptop, _ := plan.Lookup("laptop")
	sp := Speeds{TrunkDiskGBps: 6.5, ExpertDiskGBps: 6.5, BF16GBps: 40, MXFP4GBps: 16}
	const mem = 16e9
	p, err := K3.PrefillPlan(laptop.Budget(), PlanPositions, mem, 0)
	require.NoError(t, err)
	assert.LessOrEqual(t, p.Total, int64(0.95*mem))
	assert.GreaterOrEqual(t, p.Chunk, 512, "laptop on 16 GB")
	assert.Zero(t, p.Chunk%plan.MinChunk)
	for _, n := range []int{100, 16000} {
		at64 := PredictPrefill(laptop, sp, n, mem, 64, 0)
		auto := PredictPrefill(laptop, sp, n, mem, 0, 0)
		assert.Equal(t, (n+63)/64, at64.Passes)
		assert.Equal(t, (n+auto.Chunk-1)/auto.Chunk, auto.Passes)
		assert.Less(t, auto.Seconds, at64.Seconds, "n=%d", n)
		assert.InDelta(t, at64.Compute, auto.Compute, 1e-6, "the same compute whatever the chunk")
		if n == 100 {
			assert.Equal(t, 2, at64.Passes)
			assert.Equal(t, 1, auto.Passes)
		} else {
			assert.GreaterOrEqual(t, float64(at64.Bytes)/float64(auto.Bytes), 8.0, "bytes at 16K positions")
		}
	}
	// a machine whose memory cannot hold 64 positions beside the plan: no chunk
	_, err = K3.PrefillPlan(laptop.Budget(), PlanPositions, Need(laptop.Budget())/2, 0)
	assert.ErrorContains(t, err, "cannot read even 64 prompt positions per pass")
	assert.Zero(t, PredictPrefill(laptop, sp, 100, Need(laptop.Budget())/2, 0, 0).Chunk)
}
