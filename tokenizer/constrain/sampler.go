package constrain

import (
	"bytes"
	"math"

	"k3/tokenizer"
)

// Picker picks a token from logits (engine.Sampler has this method).
type Picker interface {
	Pick(pos int, logits []float32) int
}

// Markup are the ids of the K3 chat format the sampler writes or watches.
type Markup struct {
	Open, Close, Sep, EndOfMsg, EOS int
	// ThinkExit closes the think channel and opens the response channel:
	// <|close|>think<|sep|><|open|>response<|sep|>.
	ThinkExit []int
	// Tail ends the answer and the turn:
	// <|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>.
	Tail []int
}

// ForTokenizer returns t's vocabulary and chat markup.
func ForTokenizer(t *tokenizer.Tokenizer) (*Vocab, Markup) {
	n := t.VocabSize()
	toks, special := make([][]byte, n), make([]bool, n)
	for id := range n {
		special[id] = t.IsSpecial(id)
		if !special[id] {
			toks[id] = t.TokenBytes(id)
		}
	}
	id := func(name string) int { i, _ := t.SpecialID(name); return i }
	seq := func(parts ...tokenizer.Segment) []int { return t.EncodeSegments(parts) }
	ctl := func(n string) tokenizer.Segment { return tokenizer.Segment{Text: n, Special: true} }
	txt := func(s string) tokenizer.Segment { return tokenizer.Segment{Text: s} }
	return NewVocab(toks, special), Markup{
		Open: id(tokenizer.Open), Close: id(tokenizer.Close), Sep: id(tokenizer.Sep),
		EndOfMsg: id(tokenizer.EndOfMsg), EOS: id(tokenizer.EOS),
		ThinkExit: seq(ctl(tokenizer.Close), txt("think"), ctl(tokenizer.Sep), ctl(tokenizer.Open), txt("response"), ctl(tokenizer.Sep)),
		Tail:      seq(ctl(tokenizer.Close), txt("response"), ctl(tokenizer.Sep), ctl(tokenizer.Close), txt("message"), ctl(tokenizer.Sep), ctl(tokenizer.EndOfMsg)),
	}
}

type phase uint8

const (
	phThink  phase = iota // the think channel: free, but the turn may not end there
	phJSON                // the answer: JSON only
	phForced              // writing a fixed sequence
	phDone                // the turn is written
)

// Sampler constrains a K3 assistant turn's answer to the JSON of a
// Constraint. In the think channel the model is free except that it may
// not open a tag or end the turn; when it closes the think channel the
// sampler writes the rest of ThinkExit. In the answer only tokens that
// keep the JSON a valid prefix are allowed; once the value is complete,
// <|close|> may end it and the sampler writes the rest of Tail. When the
// remaining budget only just fits, it writes the shortest completion.
//
// Unlike engine samplers it keeps state: Pick must be called once per
// position, in order, so speculative decoding must be off
// (engine.SpecOff) while it is used.
type Sampler struct {
	c           *Constraint
	base        Picker
	mk          Markup
	budget      int // tokens the turn may have (0: no limit)
	n           int // tokens picked
	ph          phase
	forced      []int
	after       phase
	st          *State
	lastPos     int
	lastID      int
	masked      []float32
	Constrained int // positions where the constraint removed tokens (diagnostics)
}

// NewSampler returns a sampler for one turn whose generation prompt opened
// the think channel (thinking) or the response channel. base picks among
// the allowed tokens (nil: the argmax); budget is the turn's token cap.
func NewSampler(c *Constraint, base Picker, mk Markup, thinking bool, budget int) *Sampler {
	s := &Sampler{c: c, base: base, mk: mk, budget: budget, st: c.Start(), ph: phJSON, lastPos: -1}
	if thinking {
		s.ph = phThink
	}
	return s
}

// spare is how many tokens of budget beyond the shortest completion the
// sampler keeps: a free token can make the completion longer by its own
// opening bytes.
const spare = 32

// Pick returns the token at position pos.
func (s *Sampler) Pick(pos int, logits []float32) int {
	if pos == s.lastPos {
		return s.lastID
	}
	id := s.choose(pos, logits)
	s.advance(id)
	s.lastPos, s.lastID = pos, id
	return id
}

func (s *Sampler) remaining() int {
	if s.budget <= 0 {
		return math.MaxInt32
	}
	return s.budget - s.n
}

func (s *Sampler) choose(pos int, logits []float32) int {
	switch s.ph {
	case phForced:
		return s.forced[0]
	case phDone:
		return s.mk.EndOfMsg
	case phThink:
		need := len(s.mk.ThinkExit) + len(s.st.Completion()) + len(s.mk.Tail) + spare
		if s.remaining() <= need {
			return s.mk.ThinkExit[0]
		}
		return s.pick(pos, logits, func(id int) bool {
			return id != s.mk.Open && id != s.mk.EndOfMsg && id != s.mk.EOS
		})
	}
	// phJSON
	if s.st.Done() {
		return s.mk.Tail[0]
	}
	comp := s.st.Completion()
	if s.remaining()-len(s.mk.Tail) <= len(comp)+spare {
		if len(comp) == 0 {
			return s.mk.Tail[0]
		}
		return s.pick(pos, logits, func(id int) bool {
			b := s.c.v.tokens[id]
			return !s.c.v.special[id] && len(b) > 0 && bytes.HasPrefix(comp, b)
		})
	}
	mask := s.c.Mask(s.st)
	complete := s.st.Complete()
	return s.pick(pos, logits, func(id int) bool {
		return mask[id/64]&(1<<(id%64)) != 0 || complete && id == s.mk.Tail[0]
	})
}

// pick draws among the allowed ids: the argmax, or base on the logits with
// the others at -Inf (the renormalised distribution of the allowed ids,
// with the same random number per position).
func (s *Sampler) pick(pos int, logits []float32, ok func(int) bool) int {
	n := min(len(logits), s.c.v.Size())
	if cap(s.masked) < len(logits) {
		s.masked = make([]float32, len(logits))
	}
	m := s.masked[:len(logits)]
	best, removed := -1, false
	for id := range logits {
		if id < n && ok(id) {
			m[id] = logits[id]
			if best < 0 || logits[id] > logits[best] {
				best = id
			}
		} else {
			m[id] = float32(math.Inf(-1))
			removed = true
		}
	}
	if removed {
		s.Constrained++
	}
	if best < 0 { // nothing fits (a vocabulary without single bytes): leave it to the model
		best = 0
		for id := range logits {
			if logits[id] > logits[best] {
				best = id
			}
		}
		return best
	}
	if s.base == nil {
		return best
	}
	if id := s.base.Pick(pos, m); id >= 0 && id < n && ok(id) {
		return id
	}
	return best
}

func (s *Sampler) advance(id int) {
	s.n++
	switch s.ph {
	case phForced:
		s.forced = s.forced[1:]
		if len(s.forced) == 0 {
			s.ph = s.after
		}
	case phThink:
		if id == s.mk.Close {
			s.ph, s.forced, s.after = phForced, s.mk.ThinkExit[1:], phJSON
		}
	case phJSON:
		if id == s.mk.Tail[0] {
			s.ph, s.forced, s.after = phForced, s.mk.Tail[1:], phDone
			return
		}
		if id >= 0 && id < s.c.v.Size() && !s.c.v.special[id] {
			s.st.Feed(s.c.v.tokens[id])
		}
	}
}

// Valid reports whether the answer written so far is a complete value.
func (s *Sampler) Valid() bool { return s.st.Complete() }
