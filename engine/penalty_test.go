package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordSampler picks a fixed sequence and keeps the logits it was given.
type recordSampler struct {
	picks []int
	seen  [][]float32
}

func (r *recordSampler) Pick(pos int, logits []float32) int {
	r.seen = append(r.seen, append([]float32(nil), logits...))
	return r.picks[len(r.seen)-1]
}

// Each adjustment is applied exactly as documented, to the tokens it names
// only, from the reply so far (and the prompt, for repetition).
func TestPenaltiesExact(t *testing.T) {
	logits := []float32{1, 2, -1, 0.5, 3}
	rec := &recordSampler{picks: []int{1, 1, 3}}
	p := Penalties{Frequency: 0.5, Presence: 0.25, Repetition: 2, Bias: map[int]float64{4: -100, 0: 1.5}}
	require.NoError(t, p.Check(len(logits)))
	s := p.Sampler(rec, []int{2})
	assert.Equal(t, 1, s.Pick(10, logits))
	assert.Equal(t, 1, s.Pick(10, logits), "a second pick at a position is the first")
	assert.Equal(t, 1, s.Pick(11, logits))
	assert.Equal(t, 3, s.Pick(12, logits))
	require.Len(t, rec.seen, 3)
	// position 10: bias, and the prompt's token 2 repeated (-1 * 2)
	assert.Equal(t, []float32{2.5, 2, -2, 0.5, -97}, rec.seen[0])
	// position 11: token 1 once in the reply: 2/2 - 0.5 - 0.25
	assert.Equal(t, []float32{2.5, 0.25, -2, 0.5, -97}, rec.seen[1])
	// position 12: token 1 twice: 2/2 - 1 - 0.25
	assert.Equal(t, []float32{2.5, -0.25, -2, 0.5, -97}, rec.seen[2])
	assert.Equal(t, []float32{1, 2, -1, 0.5, 3}, logits, "the caller's logits are not changed")

	// greedy: the argmax of the adjusted logits
	g := Penalties{Bias: map[int]float64{0: 5}}.Sampler(nil, nil)
	assert.Equal(t, 0, g.Pick(0, logits))
	assert.True(t, Penalties{Repetition: 1}.IsZero())
}

func TestPenaltiesCheck(t *testing.T) {
	for _, p := range []Penalties{{Frequency: 2.5}, {Presence: -3}, {Repetition: -1}, {Bias: map[int]float64{9: 1}}, {Bias: map[int]float64{1: 101}}} {
		assert.Error(t, p.Check(5), "%+v", p)
	}
}
