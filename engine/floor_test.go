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
// a fresh one fed the same ids: a prompt chunk is dropped (no copy to roll
// back to) and read again at the next feed, a one-position decode pass is
// rolled back (its layers ran on the scratch state).
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

// TestFloorStopDuringPrefillWithinALayer: at the memory floor a prompt
// chunk (longer than a recorded pass, so no copy and no record of it) is
// stopped at the next layer after the cancel, not at the chunk's end: no
// layer after the one in flight requests an expert. The chunk is dropped
// (the state is stale), the chunks before it are kept (Pos, IDs), and the
// next turn's output is the same as a fresh run's over the same ids.
func TestFloorStopDuringPrefillWithinALayer(t *testing.T) {
	dir := fixture.ModelDir("tiny-release")
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	p := fixture.LoadExpect(t, "tiny-release").Prompts[0]
	const chunk = 2
	require.Greater(t, len(p.PromptIDs), 2*chunk)
	var cancel context.CancelFunc
	var armed bool
	var pass, prev, cancelLayer int
	var after []int // layers requesting experts after the cancel
	o := Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1}, Chunk: chunk, MaxDraft: -1,
		Trace: func(layer, expert int) {
			if layer < prev {
				pass++ // the next chunk's first MoE layer
			}
			prev = layer
			switch {
			case cancelLayer > 0:
				after = append(after, layer)
			case armed && pass == 1 && layer == 3:
				cancelLayer = layer
				cancel()
			}
		}}
	m, err := Open(dir, o)
	require.NoError(t, err)
	defer m.Close()
	require.True(t, m.lean)
	require.Greater(t, m.Bound, 5)
	e := m.NewEngine(1)
	defer e.Close()

	s := m.NewState()
	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	armed = true
	_, err = e.Feed(ctx, s, p.PromptIDs, false)
	cancel()
	armed = false
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 3, cancelLayer)
	for _, l := range after {
		assert.Equal(t, cancelLayer, l, "only the layer in flight finishes")
	}
	assert.True(t, s.stale)
	assert.Equal(t, chunk, s.Pos, "the first chunk is kept")
	assert.Equal(t, p.PromptIDs[:chunk], s.IDs)
	_, err = m.EncodeState(s)
	assert.Error(t, err, "a stale state is not saved")

	// the next turn (the rest of the prompt) generates what a fresh run
	// does: read again from the ids, or resumed from the prompt cache's
	// snapshot of the kept chunk (then only the rest is read)
	gen := len(p.GreedyIDs)
	fresh, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: gen, Spec: SpecOff})
	require.NoError(t, err)
	assert.Equal(t, p.GreedyIDs, fresh.Generated)
	snap := m.NewState()
	_, err = e.Feed(context.Background(), snap, p.PromptIDs[:chunk], false)
	require.NoError(t, err)
	mc := &memCache{}
	mc.Keep("", snap)
	for _, cached := range []bool{false, true} {
		st := s.Clone()
		require.True(t, st.stale)
		o := GenOptions{MaxTokens: gen, Spec: SpecOff}
		if cached {
			o.Cache = &CacheUse{Cache: mc, Every: -1}
		}
		got, err := e.Generate(context.Background(), st, p.PromptIDs[chunk:], o)
		require.NoError(t, err)
		assert.False(t, st.stale)
		assert.Equal(t, fresh.Generated, got.Generated, "cached %v", cached)
		requireSameBits(t, "first logits", got.FirstLogits, fresh.FirstLogits)
		read := len(p.PromptIDs) + gen - 1 // the ids fed again, the rest of the prompt, the tokens
		if cached {
			read -= chunk
		}
		assert.Equal(t, read, got.Stats.Positions, "cached %v", cached)
	}
}
