package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/config"
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
