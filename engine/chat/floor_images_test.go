package chat

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/internal/fixture"
	"k3/storage/trunk"
	"k3/tokenizer"
)

// TestSessionStopAtTheFloorAfterAPicture: a session at the memory floor
// (the trunk streamed at the smallest budgets) stopped while it reads the
// text after a picture stops at the next layer: no later layer asks for
// an expert. Asked again, it replies what a session that was never
// stopped replies (the kept chunks and the picture read again from the
// rows the state kept).
func TestSessionStopAtTheFloorAfterAPicture(t *testing.T) {
	dir := fixture.VisionModelDir(t)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err = trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	const chunk, layer = 2, 3
	var cancel context.CancelFunc
	var armed bool
	var stopPass, pass, prev, stopped int
	var after []int // layers asking for experts after the stop
	m, err := engine.Open(dir, engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1},
		Chunk: chunk, MaxDraft: -1, Trace: func(l, expert int) {
			if l < prev {
				pass++
			}
			prev = l
			switch {
			case stopped > 0:
				after = append(after, l)
			case armed && pass == stopPass && l == layer:
				stopped = l
				cancel()
			}
		}})
	require.NoError(t, err)
	e := m.NewEngine(1)
	t.Cleanup(func() { e.Close(); m.Close() })
	s := NewSession(e, tok)
	a, err := NewImage(m, picture(t, 56, 56, 10))
	require.NoError(t, err)
	ids := prompt(t, s, &a)
	want := direct(t, s, m, ids, a, 5)
	o := PromptOptions{MaxTokens: 5, Images: []Image{a}}
	whole, err := NewSession(e, tok).Generate(context.Background(), ids, o, nil)
	require.NoError(t, err)
	require.Equal(t, want, whole.IDs)

	stopPass = (a.At+a.Tokens())/chunk + 1 // a chunk of the text after the picture
	require.Less(t, (stopPass+1)*chunk, len(ids), "the stopped chunk is not the prompt's last")
	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	pass, prev, armed = 0, 0, true
	rep, err := s.Generate(ctx, ids, o, nil)
	cancel()
	armed = false
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, engine.StopCancelled, rep.Stop)
	require.Equal(t, layer, stopped)
	for _, l := range after {
		assert.Equal(t, layer, l, "only the layer in flight finishes")
	}
	stopped = 0
	rep, err = s.Generate(context.Background(), ids, o, nil)
	require.NoError(t, err)
	assert.Equal(t, want, rep.IDs, "asked again after the stop")
}
