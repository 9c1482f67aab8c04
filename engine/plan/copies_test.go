package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/storage/config"
)

// TestChatStateCopies: a chat session keeps no copies at the smallest
// presets and a snapshot plus DefaultChatCheckpoints above; ForModel
// reserves each copy as one more KDA state and one more MLA cache.
func TestChatStateCopies(t *testing.T) {
	for _, c := range []struct {
		preset string
		snap   bool
		n      int
	}{{"ultra", false, 0}, {"laptop", false, 0}, {"desktop", true, DefaultChatCheckpoints}, {"max", true, DefaultChatCheckpoints}} {
		p, ok := Lookup(c.preset)
		assert.True(t, ok)
		snap, n := ChatCopies(int64(p.TrunkGB*GB), p.Ultra)
		assert.Equal(t, c.snap, snap, c.preset)
		assert.Equal(t, c.n, n, c.preset)
		want := n
		if snap {
			want++
		}
		assert.Equal(t, want, ChatStateCopies(int64(p.TrunkGB*GB), p.Ultra), c.preset)
	}
	// just above the floor's trunk budget copies come back
	laptop, _ := Lookup("laptop")
	assert.Equal(t, 1+DefaultChatCheckpoints, ChatStateCopies(int64(laptop.TrunkGB*GB)+1, false))

	cfg := &config.Config{Layers: 4, Hidden: 64, Intermediate: 128, KDAHeads: 2, KDAHeadDim: 8, ConvK: 4,
		KVLoraRank: 16, QKRope: 8, Heads: 2, QKNope: 8, VocabSize: 100, MLA: []bool{false, false, false, true}}
	run := Run{Positions: 10, Chunk: 4}
	base := ForModel(cfg, 4, Sizes{}, run)
	run.StateCopies = 3
	with := ForModel(cfg, 4, Sizes{}, run)
	assert.Equal(t, base.StateBytes/2*5, with.StateBytes, "two states (live and rollback) plus three copies")
	assert.Equal(t, base.KVPerPos*4, with.KVPerPos, "the live MLA cache plus three copies")
	assert.Positive(t, base.KVPerPos)
	assert.Positive(t, base.StateBytes)
}
