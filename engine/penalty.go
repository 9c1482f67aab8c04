package engine

import (
	"fmt"
	"math"
)

// Penalties are the logit adjustments OpenAI's and vLLM's APIs name,
// applied in this order to the logits of each position, in float64, then
// rounded to float32 (so the result is the same on every machine):
//   - Bias (logit_bias): added to the token's logit;
//   - Repetition (repetition_penalty, 1 = none): a token in the prompt or
//     the reply so far has a positive logit divided by it, a negative one
//     multiplied by it;
//   - Frequency and Presence (frequency_penalty, presence_penalty): a token
//     written n > 0 times in the reply so far loses n*Frequency + Presence.
type Penalties struct {
	Frequency, Presence float64
	Repetition          float64 // 0 or 1: none
	Bias                map[int]float64
}

// IsZero reports whether p changes no logit.
func (p Penalties) IsZero() bool {
	return p.Frequency == 0 && p.Presence == 0 && (p.Repetition == 0 || p.Repetition == 1) && len(p.Bias) == 0
}

// Check refuses values outside the ranges the APIs define, and bias ids
// outside a vocabulary of vocab ids.
func (p Penalties) Check(vocab int) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"frequency_penalty", p.Frequency}, {"presence_penalty", p.Presence}} {
		if math.IsNaN(f.v) || f.v < -2 || f.v > 2 {
			return fmt.Errorf("%s must be from -2 to 2, got %g", f.name, f.v)
		}
	}
	if math.IsNaN(p.Repetition) || p.Repetition < 0 || p.Repetition > 100 || p.Repetition == 0 && math.Signbit(p.Repetition) {
		return fmt.Errorf("repetition_penalty must be above 0 (1: none), got %g", p.Repetition)
	}
	for id, b := range p.Bias {
		if id < 0 || id >= vocab {
			return fmt.Errorf("logit_bias names token %d: ids are from 0 to %d", id, vocab-1)
		}
		if math.IsNaN(b) || b < -100 || b > 100 {
			return fmt.Errorf("logit_bias of token %d must be from -100 to 100, got %g", id, b)
		}
	}
	return nil
}

// Sampler returns a sampler that applies p to the logits, then picks with
// inner (nil: the argmax). prompt is the prompt's ids (the repetition
// penalty counts them). It keeps the reply so far, so Pick must be called
// once per position in order (a second call at a position returns the
// first pick): speculative decoding must be off (SpecOff) while it is used.
func (p Penalties) Sampler(inner Sampler, prompt []int) *PenaltySampler {
	ps := &PenaltySampler{p: p, inner: inner, inPrompt: map[int]bool{}, counts: map[int]int{}, lastPos: -1}
	if p.Repetition != 0 && p.Repetition != 1 {
		for _, id := range prompt {
			ps.inPrompt[id] = true
		}
	}
	return ps
}

// PenaltySampler is Penalties.Sampler's sampler.
type PenaltySampler struct {
	p        Penalties
	inner    Sampler
	inPrompt map[int]bool
	counts   map[int]int // the reply's tokens so far
	lastPos  int
	lastID   int
	buf      []float32
}

// Pick adjusts the logits of position pos and picks.
func (s *PenaltySampler) Pick(pos int, logits []float32) int {
	if pos == s.lastPos {
		return s.lastID
	}
	s.buf = append(s.buf[:0], logits...)
	for id, b := range s.p.Bias {
		if id < len(s.buf) {
			s.buf[id] = float32(float64(s.buf[id]) + b)
		}
	}
	if r := s.p.Repetition; r != 0 && r != 1 {
		seen := func(id int) {
			if id >= len(s.buf) {
				return
			}
			if l := float64(s.buf[id]); l > 0 {
				s.buf[id] = float32(l / r)
			} else {
				s.buf[id] = float32(l * r)
			}
		}
		for id := range s.inPrompt {
			seen(id)
		}
		for id := range s.counts {
			if !s.inPrompt[id] {
				seen(id)
			}
		}
	}
	for id, n := range s.counts {
		if id < len(s.buf) {
			s.buf[id] = float32(float64(s.buf[id]) - float64(n)*s.p.Frequency - s.p.Presence)
		}
	}
	id := pick(s.inner, pos, s.buf)
	s.counts[id]++
	s.lastPos, s.lastID = pos, id
	return id
}
