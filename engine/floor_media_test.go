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

// TestFloorStopAfterAPicture: at the memory floor a prompt chunk stopped
// part-way after a picture was fed stops at the next layer too (no layer
// after the one in flight requests an expert), whether the picture was
// wholly fed before the chunk or only its first rows: the state keeps the
// rows of the pictures it fed, so the dropped chunk, and the chunks before
// it, are read again from them. The next feed generates what an
// uninterrupted run does, bit for bit, read again from position 0 or
// resumed from the prompt cache's snapshot of the text before the picture.
func TestFloorStopAfterAPicture(t *testing.T) {
	want := loadVisionE2E(t)
	dir := fixture.VisionModelDir(t)
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	const chunk, layer = 2, 3
	var cancel context.CancelFunc
	var armed bool
	var stopPass, pass, prev, cancelLayer int
	var after []int // layers requesting experts after the cancel
	o := Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1}, Chunk: chunk, MaxDraft: -1,
		Trace: func(l, expert int) {
			if l < prev {
				pass++ // the next chunk's first MoE layer
			}
			prev = l
			switch {
			case cancelLayer > 0:
				after = append(after, l)
			case armed && pass == stopPass && l == layer:
				cancelLayer = l
				cancel()
			}
		}}
	m, err := Open(dir, o)
	require.NoError(t, err)
	defer m.Close()
	require.True(t, m.lean)
	require.Greater(t, m.Bound, layer+2)
	e := m.NewEngine(1)
	defer e.Close()
	rows, err := e.EmbedImage(context.Background(), testImage())
	require.NoError(t, err)
	H, gen := m.Cfg.Hidden, len(want.GreedyIDs)
	withPicture := func() *State {
		s := m.NewState()
		require.NoError(t, s.AddMedia(want.MediaAt, rows, H, 7))
		return s
	}
	fresh, err := e.Generate(context.Background(), withPicture(), want.PromptIDs, GenOptions{MaxTokens: gen, Spec: SpecOff})
	require.NoError(t, err)
	require.Equal(t, want.GreedyIDs, fresh.Generated)
	snap := m.NewState() // the text before the picture, as the prompt cache keeps it
	_, err = e.Feed(context.Background(), snap, want.PromptIDs[:want.MediaAt], false)
	require.NoError(t, err)
	mc := &memCache{}
	mc.Keep("", snap)

	// the picture takes positions 4..7: chunk 3 (6..7) finishes it, chunk 4
	// (8..9) is the text after it
	require.Equal(t, 4, want.MediaAt)
	for _, p := range []int{3, 4} {
		stopPass, pass, prev, cancelLayer, after = p, 0, 0, 0, nil
		s := withPicture()
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		armed = true
		_, err := e.Feed(ctx, s, want.PromptIDs, false)
		cancel()
		armed = false
		require.ErrorIs(t, err, context.Canceled, "pass %d", p)
		require.Equal(t, layer, cancelLayer, "pass %d", p)
		t.Logf("pass %d: %d expert requests after the stop, state at %d positions", p, len(after), s.Pos)
		for _, l := range after {
			assert.Equal(t, cancelLayer, l, "pass %d: only the layer in flight finishes", p)
		}
		assert.True(t, s.stale, "pass %d", p)
		assert.Equal(t, p*chunk, s.Pos, "pass %d: the chunks before are kept", p)
		if p == 4 {
			stopDuringRebuild(t, e, s, want.PromptIDs[s.Pos:], func(c context.CancelFunc, at int) {
				cancel, stopPass, pass, prev, cancelLayer, after, armed = c, at, 0, 0, 0, nil, true
			}, func() ([]int, int) { armed = false; return after, cancelLayer })
		}
		for _, cached := range []bool{false, true} {
			st := s.Clone()
			go_ := GenOptions{MaxTokens: gen, Spec: SpecOff}
			if cached {
				go_.Cache = &CacheUse{Cache: mc, Every: -1}
			}
			got, err := e.Generate(context.Background(), st, want.PromptIDs[s.Pos:], go_)
			require.NoError(t, err, "pass %d cached %v", p, cached)
			assert.False(t, st.stale)
			assert.Equal(t, fresh.Generated, got.Generated, "pass %d cached %v", p, cached)
			requireSameBits(t, "first logits", got.FirstLogits, fresh.FirstLogits)
			assert.Equal(t, []MediaKey{{At: want.MediaAt, N: 4, Key: 7}}, st.FedMedia())
			read := len(want.PromptIDs) + gen - 1 // the ids fed again, the rest of the prompt, the tokens
			if cached {
				read -= want.MediaAt
			}
			assert.Equal(t, read, got.Stats.Positions, "pass %d cached %v", p, cached)
		}
	}
}

// stopDuringRebuild stops the feed of rest on a copy of the stale state s
// while it reads s's ids again (the rebuild's third pass: the picture's
// first rows) stops at the next layer too, and the copy stays as it was:
// stale at the same position, the picture fed.
// arm sets the test's trace to cancel at a pass; disarm returns the
// layers that asked for experts after the cancel and the layer cancelled.
func stopDuringRebuild(t *testing.T, e *Engine, s *State, rest []int, arm func(context.CancelFunc, int), disarm func() ([]int, int)) {
	t.Helper()
	st := s.Clone()
	ctx, cancel := context.WithCancel(context.Background())
	arm(cancel, 2)
	_, err := e.Feed(ctx, st, rest, false)
	cancel()
	after, at := disarm()
	require.ErrorIs(t, err, context.Canceled)
	require.Positive(t, at, "the rebuild was stopped")
	for _, l := range after {
		assert.Equal(t, at, l, "only the layer in flight finishes")
	}
	assert.True(t, st.stale)
	assert.Equal(t, s.Pos, st.Pos)
	assert.Equal(t, s.IDs, st.IDs)
	assert.Equal(t, s.FedMedia(), st.FedMedia())
}
