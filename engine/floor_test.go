package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/trunk"
)

// TestFloorKeepsOneState: at the memory floor (a streamed run at a trunk
// budget no larger than laptop's) no copy of the whole KDA state is kept:
// a pass of a few positions runs each KDA layer on one layer's scratch
// state and replays its record, so the plan holds the state once (and the
// scratch), where above the floor it holds a rollback copy too; the ids
// are the same, with speculation and without.
func TestFloorKeepsOneState(t *testing.T) {
	dir := fixture.ModelDir("tiny-release")
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	p := fixture.LoadExpect(t, "tiny-release").Prompts[0]
	open := func(trunkBytes int64) *Model {
		m, err := Open(dir, Options{TrunkDir: tr, Budget: Budget{TrunkBytes: trunkBytes, Ring: 2, CacheBytes: 1}})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	floor, above := open(1), open(4e9)
	require.True(t, floor.lean)
	require.False(t, above.lean)
	one := above.Plan.State - floor.Plan.State // a copy less, a layer's scratch more
	assert.Positive(t, one)
	for _, sp := range []Spec{SpecOff, 4} {
		var got [2][]int
		for i, m := range []*Model{floor, above} {
			e := m.NewEngine(1)
			ctx, cancel := context.WithCancel(context.Background()) // cancellable, as k3 run's
			res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: len(p.GreedyIDs), Spec: sp})
			cancel()
			require.NoError(t, err)
			got[i] = res.Generated
			if m == floor {
				assert.Nil(t, res.State.backup, "spec %s: no copy of the whole state at the floor", sp)
			}
			e.Close()
		}
		assert.Equal(t, p.GreedyIDs, got[0], "spec %s", sp)
		assert.Equal(t, got[1], got[0], "spec %s", sp)
	}
}
