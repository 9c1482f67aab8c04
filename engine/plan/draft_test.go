package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/config"
	"k3/storage/units"
)

// TestDraftCounted: a draft model adds its weights and its context rows
// for every position (the chat's state copies included, and a pass's
// drafts) to the plan's total, on a line of its own.
func TestDraftCounted(t *testing.T) {
	c, err := config.Load(fixture.ModelDir("tiny-release") + "/config.json")
	require.NoError(t, err)
	s := Sizes{LayerBytes: []int64{3, 4}}
	r := Run{Positions: 100, SpecPositions: 9, StateCopies: 2}
	without := Make(ForModel(c, 2, s, r))
	r.DraftBytes, r.DraftPerPos = 1_000_000, 1000
	with := Make(ForModel(c, 2, s, r))
	want := int64(1_000_000 + 3*1000*(100+8))
	assert.Equal(t, want, with.Draft)
	assert.Equal(t, without.Total+want, with.Total)
	assert.Zero(t, without.Draft)
	assert.Contains(t, with.String(), "draft model")
	assert.NotContains(t, without.String(), "draft model")
}

// TestDraftRefusedAtTheFloor: at the laptop preset's 8 GB floor the
// released drafter (7.12 GB bf16) does not fit beside the plan: Check
// refuses, naming the memory the run needs, the drafter's share and that
// the run fits without it.
func TestDraftRefusedAtTheFloor(t *testing.T) {
	c, err := config.Load(fixture.ModelDir("tiny-release") + "/config.json")
	require.NoError(t, err)
	s := Sizes{LayerBytes: []int64{3, 4}}
	r := Run{Positions: 100}
	base := Make(ForModel(c, 2, s, r))
	mem := Memory{AvailableBytes: int64(float64(base.Total+1_000_000_000) / 0.95)} // 1 GB to spare
	require.NoError(t, base.Check(mem))
	r.DraftBytes = 7_124_633_450
	with := Make(ForModel(c, 2, s, r))
	err = with.Check(mem)
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "needs "+units.Bytes(with.Total)+" with the draft model ("+units.Bytes(with.Draft)+" of it")
	assert.Contains(t, msg, "without --draft the plan needs "+units.Bytes(base.Total)+", which fits")

	// a machine too small even without the drafter: says so
	small := Memory{AvailableBytes: base.Total / 2}
	err = with.Check(small)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "also without it the plan needs "+units.Bytes(base.Total)+", more than fits")
}

// TestDraftPlaced: PlaceDraft keeps the draft model resident where the
// plan with it resident fits (or the memory is unknown) and streams it
// where it does not: the streamed plan counts what it keeps (not its
// weights) and shows the bytes it reads per drafting cycle.
func TestDraftPlaced(t *testing.T) {
	c, err := config.Load(fixture.ModelDir("tiny-release") + "/config.json")
	require.NoError(t, err)
	s := Sizes{LayerBytes: []int64{3, 4}}
	r := Run{Positions: 100, DraftBytes: 7_000_000, DraftPerPos: 1000, DraftStream: 600_000, DraftRead: 6_500_000}
	in := ForModel(c, 2, s, r)
	resident := Make(in)
	assert.False(t, resident.DraftStreamed)
	assert.Equal(t, int64(7_000_000+1000*100), resident.Draft)

	assert.False(t, PlaceDraft(in, 0).DraftStreamed, "memory unknown")
	assert.False(t, PlaceDraft(in, resident.Total).DraftStreamed, "fits resident")
	placed := PlaceDraft(in, resident.Total-1)
	require.True(t, placed.DraftStreamed)
	streamed := Make(placed)
	assert.True(t, streamed.DraftStreamed)
	assert.Equal(t, int64(600_000+1000*100), streamed.Draft)
	assert.Equal(t, resident.Total-(7_000_000-600_000), streamed.Total)
	assert.Equal(t, int64(6_500_000), streamed.DraftRead)
	assert.Contains(t, streamed.String(), "streamed: "+units.Bytes(6_500_000)+" read per drafting cycle")
	assert.Contains(t, resident.String(), "resident: weights and context rows")
}
