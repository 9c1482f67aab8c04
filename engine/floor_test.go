package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
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

// TestFloorCancelMidPass: at the floor a pass stopped part-way (by a
// cancel during its expert reads) leaves a state that goes on exactly as
// a fresh one fed the same ids: a prompt chunk finishes first (no copy to
// roll back to), a one-position decode pass is rolled back (its layers
// ran on the scratch state).
func TestFloorCancelMidPass(t *testing.T) {
	dir := fixture.ModelDir("tiny-release")
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	p := fixture.LoadExpect(t, "tiny-release").Prompts[0]
	var cur atomic.Pointer[context.CancelFunc] // the case's
	var reads, cancelAt atomic.Int64
	o := Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1}, Chunk: 4,
		ExpertReadAt: func(path string, off int64, dst []byte) error {
			if reads.Add(1) == cancelAt.Load() {
				(*cur.Load())()
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.ReadAt(dst, off)
			return err
		}}
	m, err := Open(dir, o)
	require.NoError(t, err)
	defer m.Close()
	require.True(t, m.lean)
	e := m.NewEngine(1)
	defer e.Close()
	next := func(s *State) []float32 {
		lg, err := e.Feed(context.Background(), s, []int{p.GreedyIDs[0]}, false)
		require.NoError(t, err)
		return lg
	}
	for _, c := range []struct {
		name string
		ids  []int // fed before the cancel
	}{
		{"prompt chunk", p.PromptIDs},    // chunks of 4 positions: longer than a recorded pass
		{"decode pass", p.PromptIDs[:1]}, // one position: recorded
	} {
		s := m.NewState()
		ctx, cancel := context.WithCancel(context.Background())
		cur.Store(&cancel)
		reads.Store(0)
		cancelAt.Store(3) // the third expert read: inside the first pass
		_, err := e.Feed(ctx, s, c.ids, false)
		cancel()
		require.ErrorIs(t, err, context.Canceled, c.name)
		require.False(t, s.damaged, c.name)
		cancelAt.Store(0)
		fresh := m.NewState()
		if len(s.IDs) > 0 {
			_, err := e.Feed(context.Background(), fresh, s.IDs, false)
			require.NoError(t, err)
		}
		assert.Equal(t, next(fresh), next(s), c.name)
		assert.Nil(t, s.backup, c.name)
	}
}
