package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestVisionInPlan: the tower is resident above the floor (its weights
// kept, and the larger of a picture's work and a prompt chunk), streamed
// at the floor (its streamed part counted with the picture, inside the
// same transient share), nothing without a planned picture; FitTower
// streams it when the resident plan passes the limit.
func TestVisionInPlan(t *testing.T) {
	v := VisionSizes{Weights: 900, Streamed: 150, PerPos: 2}
	base := Inputs{LayerBytes: []int64{100}, StateBytes: 10, BufferBytes: 5, BaselineRSS: 1000, Chunk: 8, Prefill: PrefillCost{PerPos: 10}}
	text := Make(base).Total
	assert.Equal(t, int64(1000+100+10+5+80), text)
	assert.Equal(t, VisionCost{}, VisionFor(v, 0, 0, false), "no picture planned: no tower")
	assert.Equal(t, VisionCost{}, VisionFor(VisionSizes{}, 100, 0, false), "no tower")

	res := base
	res.Vision = VisionFor(v, 100, 0, false)
	p := Make(res)
	assert.False(t, p.TowerStreamed)
	assert.Equal(t, int64(900), p.Tower)
	assert.Equal(t, int64(200), p.Picture)
	assert.Equal(t, text-80+900+200, p.Total, "resident weights + max(picture 200, chunk 80)")

	str := base
	str.Vision = VisionFor(v, 100, 0, true)
	p = Make(str)
	assert.True(t, p.TowerStreamed)
	assert.Equal(t, int64(150), p.Tower)
	assert.Equal(t, text-80+150+200, p.Total, "max(streamed part 150 + picture 200, chunk 80)")
	assert.Contains(t, p.String(), "streamed: read layer by layer")

	long := base
	long.Chunk = 32 // 320 bytes of prompt reading
	textLong := Make(long).Total
	long.Vision = VisionFor(v, 10, 0, true)
	assert.Equal(t, textLong, Make(long).Total, "a streamed tower and a small picture (150 + 20) fit in a long chunk's share (320)")

	// at the floor the rows of the pictures fed before this one are kept
	// (engine: State.dropFedMedia), up to the rest of the context: counted
	// with the picture; above the floor fed rows are let go
	kept := base
	kept.Positions = 400
	v.Row = 1
	kept.Vision = VisionFor(v, 100, 400, true)
	assert.Equal(t, int64(300), kept.Vision.Kept, "one row for each of the other 300 positions")
	p = Make(kept)
	assert.Equal(t, int64(300), p.PictureKept)
	assert.Equal(t, Make(str).Total+300, p.Total, "max(streamed part 150 + picture 200 + kept 300, chunk 80)")
	assert.Contains(t, p.String(), "pictures fed")
	assert.Zero(t, VisionFor(v, 100, 400, false).Kept, "above the floor")
	v.Row = 0

	fit := res
	FitTower(&fit, v, Make(res).Total) // fits: stays resident
	assert.False(t, fit.Vision.Streamed)
	FitTower(&fit, v, Make(res).Total-1)
	assert.True(t, fit.Vision.Streamed, "streamed when resident does not fit")
	assert.Equal(t, 100, fit.Vision.Positions)
}

// TestFloorFor: the floor is a streamed budget no larger than laptop's;
// a budget holding the whole trunk streams nothing and is not at it.
func TestFloorFor(t *testing.T) {
	assert.True(t, FloorFor(3e9, 108e9, false), "K3 at laptop")
	assert.False(t, FloorFor(16e9, 108e9, false), "K3 at desktop")
	assert.False(t, FloorFor(3e9, 1.4e6, false), "the demo at laptop: all pinned")
	assert.True(t, FloorFor(1e6, 1.4e6, false), "the demo below its layers")
	assert.True(t, FloorFor(3e9, 0, false), "unknown size: as Floor")
	assert.True(t, FloorFor(16e9, 1.4e6, true), "ultra")
}
