package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPCG32Reference: the first outputs of pcg32 seeded (42, 54), the
// example in O'Neill's pcg32-demo.
func TestPCG32Reference(t *testing.T) {
	p := NewPCG32(42, 54)
	want := []uint32{0xa15c02b7, 0x7b47f409, 0xba1d3330, 0x83d2f293, 0xbfa4784b, 0xcbed606e}
	for i, w := range want {
		if g := p.Uint32(); g != w {
			t.Fatalf("output %d = %#x, want %#x", i, g, w)
		}
	}
}

func TestSamplerDeterministic(t *testing.T) {
	logits := []float32{1, 2, 3, 2.5, -1, 0.5, 3}
	draw := func(seed uint64) []int {
		s := Sampling{Temperature: 0.8, TopK: 5, TopP: 0.95, Seed: seed}.Sampler(1)
		var out []int
		for pos := 0; pos < 200; pos++ {
			out = append(out, s.Pick(pos, logits))
		}
		return out
	}
	a, b, c := draw(7), draw(7), draw(8)
	same, counts := true, map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different draws")
		}
		same = same && a[i] == c[i]
		counts[a[i]]++
	}
	if same {
		t.Fatal("different seeds gave identical draws")
	}
	// top-k 5 excludes ids 4 (-1) and 5 (0.5); the two 3s dominate
	if counts[4] != 0 || counts[5] != 0 || counts[2]+counts[6] < 100 {
		t.Fatalf("counts %v", counts)
	}
	if s := (Sampling{Greedy: true, Temperature: 1, Seed: 1}).Sampler(1); s != nil {
		t.Fatalf("greedy settings gave a random sampler %T", s)
	}
	if g := pick(nil, 0, logits); g != 2 {
		t.Fatalf("greedy picked %d, want the first maximum 2", g)
	}
}

// TestSamplerPerPosition: a pick depends on the seed, the stream and the
// position only, never on the picks made before it (speculative decoding
// picks a position again after a rejected draft, and skips none).
func TestSamplerPerPosition(t *testing.T) {
	logits := []float32{0.1, 0.3, 0.2, 0.25, 0.15, 0.05}
	o := Sampling{Temperature: 1, Seed: 42}
	a, b := o.Sampler(3), o.Sampler(3)
	for pos := 0; pos < 50; pos++ {
		b.Pick(pos, logits) // b has drawn before, a has not
	}
	for pos := 49; pos >= 0; pos-- {
		assert.Equal(t, b.Pick(pos, logits), a.Pick(pos, logits), "position %d", pos)
	}
	// the stream and the position both select the draw
	assert.Equal(t, uint64(3<<32|7), positionStream(3, 7))
	diffStream, diffPos := 0, 0
	c := o.Sampler(4)
	for pos := 0; pos < 100; pos++ {
		if a.Pick(pos, logits) != c.Pick(pos, logits) {
			diffStream++
		}
		if a.Pick(pos, logits) != a.Pick(pos+100, logits) {
			diffPos++
		}
	}
	assert.Greater(t, diffStream, 30)
	assert.Greater(t, diffPos, 30)
}
