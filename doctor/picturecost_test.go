package doctor

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/engine/vision"
)

// TestPictureCost: a 1024x1024 picture is 1,369 prompt positions at every
// preset; at the floor (ultra, laptop) the tower is streamed and the plan
// grows only by what a picture holds while the tower looks at it (the
// streamed part, its work and the rows of pictures fed before it, beyond
// the prompt chunk's share); above it
// the tower (0.90 GB) is resident. The tower's seconds are its FLOPs at
// TowerPeakFraction of the FMA peak, plus a streamed tower's read; a text
// plan (Need) counts no tower.
func TestPictureCost(t *testing.T) {
	require.Equal(t, vision.Released(), *K3Vision, "the embedded released vision_config")
	s := Speeds{TrunkDiskGBps: 3, ExpertDiskGBps: 2, BF16GBps: 20, MXFP4GBps: 8, FMAGFlops: 41}
	mem := plan.Memory{TotalBytes: 64e9, AvailableBytes: 60e9}
	flops := K3Vision.CostOf(PictureGrid()).Flops
	assert.InDelta(t, 9.45e12, flops, 0.05e12)
	for _, p := range plan.Presets {
		c := PredictPicture(p, s, mem)
		text := K3.Plan(p.Budget())
		assert.Equal(t, 1369, c.Positions, p.Name)
		floor := plan.Floor(int64(p.TrunkGB*plan.GB), p.Ultra)
		assert.Equal(t, floor, c.TowerStreamed, p.Name)
		look := flops / (TowerPeakFraction * 41e9)
		if floor {
			assert.Equal(t, K3Vision.StreamedBytes(), c.TowerBytes, p.Name)
			// with the rows of the pictures fed before it in the rest of the
			// 4K context, kept at the floor (plan.VisionCost.Kept)
			kept := int64(PlanPositions-1369) * 4 * int64(K3Vision.TextHidden)
			assert.Equal(t, text.Total-text.Prefill+max(text.Prefill, c.TowerBytes+1369*K3Vision.WorkPerPos()+kept), c.PeakRSSBytes, p.Name)
			look += float64(K3Vision.WeightBytes()) / 3e9
		} else {
			assert.Equal(t, K3Vision.WeightBytes(), c.TowerBytes, p.Name)
			assert.Equal(t, text.Total-text.Prefill+c.TowerBytes+max(text.Prefill, 1369*K3Vision.WorkPerPos()), c.PeakRSSBytes, p.Name)
		}
		assert.InDelta(t, look, c.TowerSeconds, 0.01, p.Name)
		assert.Equal(t, Need(p.Budget()), text.Total, "the text plan counts no tower")
		assert.Equal(t, p.Name != "ultra" && p.Name != "laptop" && p.Name != "desktop", !c.Fits, "%s at 60 GB", p.Name)
		if c.Fits {
			f := PredictPrefill(p, s, 1369, mem.Usable(), 0, 0)
			assert.InDelta(t, f.Seconds, c.PromptSeconds, 0.01, p.Name)
			assert.InDelta(t, c.TowerSeconds+c.PromptSeconds, c.Seconds, 0.02, p.Name)
		}
	}
	assert.InDelta(t, 0.90e9, float64(K3Vision.WeightBytes()), 0.01e9)
	assert.InDelta(t, 0.14e9, float64(K3Vision.StreamedBytes()), 0.01e9)
}
