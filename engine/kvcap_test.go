package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
)

// TestKVCacheCapacityIsPlanned: the MLA cache's rows hold what the plan
// counts (Plan.KV, for Plan.KVPositions positions) and no more, fed a
// prompt in chunks and then position by position; past the planned
// positions they grow by whole plan.ContextStep steps, what plan.Grow
// plans. Grown by append (16 positions, then doubling), a 27-position run
// held 32 positions' rows and twice the rows while it copied.
func TestKVCacheCapacityIsPlanned(t *testing.T) {
	model, _ := budgetCheckpoint(t)
	const planned = 27
	m, err := Open(model, Options{Budget: Budget{CacheBytes: 1 << 40}, Chunk: 16, Positions: planned})
	require.NoError(t, err)
	defer m.Close()
	require.GreaterOrEqual(t, m.Plan.KVPositions, planned)
	e := m.NewEngine(2)
	defer e.Close()
	s := m.NewState()
	kvBytes := func() (n int64) {
		for _, c := range s.mla {
			if c != nil {
				n += int64(cap(c.rows)) * 4
			}
		}
		return n
	}
	ids := []int{5, 77, 300, 12, 999, 41, 8, 150, 151, 152, 3, 600, 601, 2, 9, 10, 11, 12, 13, 14, 700}
	_, err = e.Feed(context.Background(), s, ids, false)
	require.NoError(t, err)
	require.Positive(t, kvBytes())
	assert.Equal(t, m.Plan.KV, kvBytes(), "the rows the plan counts, allocated once")
	for p := len(ids); p < m.Plan.KVPositions; p++ {
		_, err = e.Feed(context.Background(), s, []int{p}, false)
		require.NoError(t, err)
		assert.Equal(t, m.Plan.KV, kvBytes(), "position %d", p)
	}
	// one position past the plan: a chat's plan grows by plan.ContextStep
	_, err = e.Feed(context.Background(), s, []int{1}, false)
	require.NoError(t, err)
	assert.Equal(t, m.Plan.KV/int64(m.Plan.KVPositions)*plan.ContextStep, kvBytes())
	for _, c := range s.mla {
		if c != nil {
			assert.Equal(t, (m.Plan.KVPositions+1)*c.width, len(c.rows))
		}
	}
}

// TestDraftRowsCapacityIsPlanned: a draft model's context rows, as the MLA
// cache's, hold the positions the plan counts for them (Plan.KVPositions)
// and no more, through a run that drafts; grown by append they held
// spare positions past the plan.
func TestDraftRowsCapacityIsPlanned(t *testing.T) {
	p := fixture.LoadExpect(t, "tiny-release").Prompts[1]
	planned := len(p.PromptIDs) + 16
	m := openWithDraft(t, "tiny-release", Options{Positions: planned, Chunk: 16})
	e := m.NewEngine(2)
	defer e.Close()
	res, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: 16, Spec: 3})
	require.NoError(t, err)
	require.Positive(t, res.Stats.SpecDrafted)
	ds := res.State.draft
	require.NotNil(t, ds)
	require.Positive(t, ds.n)
	for l, r := range ds.rows {
		assert.Equal(t, m.Plan.KVPositions*ds.width, cap(r), "layer %d", l)
	}
	for _, c := range res.State.mla {
		if c != nil {
			assert.Equal(t, m.Plan.KVPositions*c.width, cap(c.rows))
		}
	}
}
