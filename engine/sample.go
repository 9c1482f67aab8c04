package engine

import (
	"math"
	"sort"
)

// PCG32 is the PCG XSH-RR 64/32 generator (O'Neill's pcg32): a 64-bit LCG
// state with a per-stream odd increment, 32-bit output.
type PCG32 struct{ state, inc uint64 }

// NewPCG32 seeds a generator on a stream; different streams with the same
// seed are independent sequences.
func NewPCG32(seed, stream uint64) *PCG32 {
	p := &PCG32{inc: stream<<1 | 1}
	p.Uint32()
	p.state += seed
	p.Uint32()
	return p
}

// Uint32 returns the next 32 random bits.
func (p *PCG32) Uint32() uint32 {
	old := p.state
	p.state = old*6364136223846793005 + p.inc
	x := uint32(((old >> 18) ^ old) >> 27)
	r := uint32(old >> 59)
	return x>>r | x<<((-r)&31)
}

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (p *PCG32) Float64() float64 {
	hi := uint64(p.Uint32()) >> 5 // 27 bits
	lo := uint64(p.Uint32()) >> 6 // 26 bits
	return float64(hi<<26|lo) / (1 << 53)
}

// Sampler picks the token at absolute position pos (the number of ids
// before it in the sequence) from the logits that predict it. A sampler
// must be a pure function of (pos, logits): speculative decoding verifies
// several positions in one pass and picks each of them once more after a
// rejection, and the draft model asks it what it would pick from the
// draft's logits (Draft.block): the result must not depend on how many
// picks came before or on which logits they were.
//
// A sampler that keeps state (a constrained one, whose allowed tokens
// follow from the tokens it picked) may say so with Ordered: Generate
// then asks it only about the tokens it writes, once per position in
// order (a position asked again, after a rejected draft, comes with the
// same logits and gets the same token), and never on a draft model's
// logits (the draft model drafts greedily for it). Verification passes
// pick in that order, so drafting stays on and the tokens are those of
// plain decoding.
type Sampler interface {
	Pick(pos int, logits []float32) int
}

// Ordered is a Sampler that keeps state (see Sampler).
type Ordered interface {
	Sampler
	Ordered() bool
}

// foresight is the sampler a draft model may consult: s, or nil when s
// keeps state (Ordered).
func foresight(s Sampler) Sampler {
	if o, ok := s.(Ordered); ok && o.Ordered() {
		return nil
	}
	return s
}

// pick uses s, or the argmax when s is nil.
func pick(s Sampler, pos int, logits []float32) int {
	if s == nil {
		return argmax(logits)
	}
	return s.Pick(pos, logits)
}

// Sampling are the sampling settings every face shares (CLI flags, chat
// options, the app's settings, server requests). The zero value is greedy.
type Sampling struct {
	Greedy      bool    // argmax, whatever the temperature
	Temperature float64 // <= 0: greedy
	TopK        int     // 0: all
	TopP        float64 // 0 or >= 1: all
	Seed        uint64
}

// IsGreedy reports whether these settings always pick the argmax.
func (o Sampling) IsGreedy() bool { return o.Greedy || o.Temperature <= 0 }

// Sampler returns a sampler for these settings (nil when greedy). Each
// position draws its one uniform number from its own PCG32 stream of the
// seed, (stream << 32) | position, so the draw at a position never depends
// on how the positions before it were decoded (one at a time, or verified
// together by speculative decoding).
func (o Sampling) Sampler(stream uint64) Sampler {
	if o.IsGreedy() {
		return nil
	}
	return &randomSampler{o: o, stream: stream}
}

// randomSampler draws from the tempered, top-k and top-p filtered
// distribution.
type randomSampler struct {
	o      Sampling
	stream uint64
}

// positionStream is the PCG32 stream of position pos of a sampler's stream.
func positionStream(stream uint64, pos int) uint64 { return stream<<32 | uint64(uint32(pos)) }

// Pick returns the id chosen at position pos.
func (r *randomSampler) Pick(pos int, logits []float32) int {
	s := r.o
	type cand struct {
		id int
		l  float64
	}
	c := make([]cand, len(logits))
	for i, l := range logits {
		c[i] = cand{i, float64(l)}
	}
	// descending logit, ties by id: a total order, so the result is reproducible
	sort.Slice(c, func(a, b int) bool {
		if c[a].l != c[b].l {
			return c[a].l > c[b].l
		}
		return c[a].id < c[b].id
	})
	if s.TopK > 0 && s.TopK < len(c) {
		c = c[:s.TopK]
	}
	p := make([]float64, len(c))
	z := 0.0
	for i := range c {
		p[i] = math.Exp((c[i].l - c[0].l) / s.Temperature)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	if s.TopP > 0 && s.TopP < 1 {
		cum := 0.0
		for i := range p {
			cum += p[i]
			if cum >= s.TopP {
				c, p = c[:i+1], p[:i+1]
				break
			}
		}
		z = 0
		for _, v := range p {
			z += v
		}
		for i := range p {
			p[i] /= z
		}
	}
	u := NewPCG32(r.o.Seed, positionStream(r.stream, pos)).Float64()
	cum := 0.0
	for i := range p {
		cum += p[i]
		if u < cum {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

func argmax(x []float32) int {
	best := 0
	for i := 1; i < len(x); i++ {
		if x[i] > x[best] {
			best = i
		}
	}
	return best
}
