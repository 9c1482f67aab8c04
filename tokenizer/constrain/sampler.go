package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// Picker picks a token from logits (engine.Sampler has this method).
type Picker interface {
	Pick(pos int, logits []float32) int
}

// Turn is what a Sampler needs of a tokenizer: its vocabulary and the
// ids of the chat format's control tokens, and a way to encode markup.
type Turn struct {
	V                               *Vocab
	Open, Close, Sep, EndOfMsg, EOS int
	t                               *tokenizer.Tokenizer
	// Masks is shared by the turns' constraints: equal schemas (compiled
	// again by each request) reuse the masks of the states seen before.
	Masks *MaskCache
}

// ForTokenizer returns t's vocabulary and chat markup.
func ForTokenizer(t *tokenizer.Tokenizer) *Turn {
	n := t.VocabSize()
	toks, special := make([][]byte, n), make([]bool, n)
	for id := range n {
		special[id] = t.IsSpecial(id)
		if !special[id] {
			toks[id] = t.TokenBytes(id)
		}
	}
	id := func(name string) int { i, _ := t.SpecialID(name); return i }
	return &Turn{V: NewVocab(toks, special), Open: id(tokenizer.Open), Close: id(tokenizer.Close), Sep: id(tokenizer.Sep),
		EndOfMsg: id(tokenizer.EndOfMsg), EOS: id(tokenizer.EOS), t: t, Masks: NewMaskCache(SharedCacheBytes)}
}

// constraint is s over the Turn's vocabulary, with the Turn's shared
// masks (a private cache when the Turn has none).
func (tn *Turn) constraint(s *Schema) *Constraint {
	if tn.Masks == nil {
		return New(tn.V, s)
	}
	return newConstraint(tn.V, s, tn.Masks)
}

// markup encodes a sequence of control tokens (names starting "<|") and
// text.
func (tn *Turn) markup(parts ...string) []int {
	segs := make([]xtml.Segment, len(parts))
	for i, p := range parts {
		segs[i] = xtml.Segment{Text: p, Special: len(p) > 2 && p[:2] == "<|"}
	}
	return xtml.Encode(tn.t, segs)
}

// Plan is what a turn must be, in phases (Turn.Answer, Turn.ToolCall).
type Plan []phase

// phase is one part of a planned turn: the model writing freely until it
// closes the channel (then Exit is written), a fixed sequence, JSON, or a
// choice between fixed sequences (the model's logits pick among their
// first tokens).
type phase struct {
	free   bool
	lazy   bool  // free with no budget reserve, and the turn may end in it (AutoCall)
	forced []int // free: the exit sequence its <|close|> begins; else written as is
	schema *Schema
	choose map[string]*Schema // a JSON phase whose text (a JSON string) picks the next JSON phase's schema
	min    int                // tokens (at most: bytes) this phase needs at least
	index  bool               // forced is the call index markup, written with the call's number
	alts   [][]int            // a choice: the sequences (the last one ends the turn)
	to     []int              // a choice: the phase each sequence leads to
}

// ends reports whether id ends a turn (<|end_of_msg|>, the end of text).
func (tn *Turn) ends(id int) bool {
	return id >= 0 && id < tn.V.Size() && tn.V.special[id] && (id == tn.EndOfMsg || id == tn.EOS)
}

func (tn *Turn) thinkExit() []int {
	return tn.markup(tokenizer.Close, "think", tokenizer.Sep, tokenizer.Open, "response", tokenizer.Sep)
}

// Answer plans a turn whose answer is JSON of schema s: free thinking (if
// the generation prompt opened the think channel), the JSON, then the
// close of the response channel and of the message.
func (tn *Turn) Answer(s *Schema, thinking bool) Plan {
	var p Plan
	if thinking {
		p = append(p, phase{free: true, forced: tn.thinkExit()})
	}
	return append(p, phase{schema: s},
		phase{forced: tn.markup(tokenizer.Close, "response", tokenizer.Sep, tokenizer.Close, "message", tokenizer.Sep, tokenizer.EndOfMsg)})
}

// ToolCall plans a turn that must call one of tools (name -> arguments
// schema): free thinking, a free answer, then calls, each written as
// `<|open|>call tool="NAME" index="N"<|sep|><|open|>json type="object"<|sep|>ARGS<|close|>json<|sep|><|close|>call<|sep|>`,
// where the name is one of the tools and ARGS fits its schema. After each
// call the model may write another (unless single), while the budget
// fits one. It returns nil if a name is not written the same in a tag and
// in JSON.
func (tn *Turn) ToolCall(tools map[string]*Schema, thinking, single bool) Plan {
	nameSchema := toolNames(tools)
	if nameSchema == nil {
		return nil
	}
	var p Plan
	if thinking {
		p = append(p, phase{free: true, forced: tn.thinkExit()})
	}
	O, C, S := tokenizer.Open, tokenizer.Close, tokenizer.Sep
	p = append(p, phase{free: true, forced: tn.markup(C, "response", S, O, "tools", S, O, "call tool=")})
	return tn.calls(p, tools, nameSchema, single)
}

// AutoCall plans a turn whose calls are the model's choice (tool_choice
// auto), held lazily as llama.cpp's lazy grammars are: thinking and the
// answer are free (no budget reserve; the model may end the turn there),
// and when the model, having closed the response channel, opens the tools
// section rather than closing the message, each call it writes is held as
// ToolCall holds them: the name one of tools, the arguments its schema.
// nil as ToolCall.
func (tn *Turn) AutoCall(tools map[string]*Schema, thinking, single bool) Plan {
	nameSchema := toolNames(tools)
	if nameSchema == nil {
		return nil
	}
	var p Plan
	if thinking {
		p = append(p, phase{free: true, lazy: true, forced: tn.thinkExit()})
	}
	O, C, S := tokenizer.Open, tokenizer.Close, tokenizer.Sep
	p = append(p, phase{free: true, lazy: true, forced: tn.markup(C, "response", S)})
	trigger := len(p)
	p = append(p, phase{alts: [][]int{tn.markup(O, "tools", S, O, "call tool="), tn.markup(C, "message", S, tokenizer.EndOfMsg)}})
	p = tn.calls(p, tools, nameSchema, single)
	p[trigger].to = []int{trigger + 1, len(p)}
	return p
}

// toolNames is the schema of a call's name: one of tools' names (nil when
// there are none, or a name is not written the same in a tag and in JSON).
func toolNames(tools map[string]*Schema) *Schema {
	var names []any
	for n := range tools {
		for _, c := range []byte(n) {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return nil
			}
		}
		names = append(names, n)
	}
	enum, _ := json.Marshal(map[string]any{"enum": names})
	nameSchema, err := Compile(enum)
	if err != nil || len(names) == 0 {
		return nil
	}
	return nameSchema
}

// calls appends to p the phases of the calls (p's last phase leads to the
// first call's name): the name, its index, the arguments (the schema the
// name chooses) and the call's close; then another call (unless single)
// or the end of the tools section and of the turn.
func (tn *Turn) calls(p Plan, tools map[string]*Schema, nameSchema *Schema, single bool) Plan {
	O, C, S := tokenizer.Open, tokenizer.Close, tokenizer.Sep
	first := len(p) // the name phase
	end := tn.markup(C, "tools", S, C, "message", S, tokenizer.EndOfMsg)
	p = append(p,
		phase{schema: nameSchema, choose: tools},
		phase{forced: tn.callIndex(1), index: true},
		phase{}, // the arguments: schema chosen by the name
		phase{forced: tn.markup(C, "json", S, C, "call", S)})
	if single {
		return append(p, phase{forced: end})
	}
	return append(p, phase{alts: [][]int{tn.markup(O, "call tool="), end}, to: []int{first, len(p) + 1}})
}

// callIndex is the markup after a call's name: its index and the opening
// of its arguments.
func (tn *Turn) callIndex(n int) []int {
	return tn.markup(fmt.Sprintf(` index="%d"`, n), tokenizer.Sep, tokenizer.Open, `json type="object"`, tokenizer.Sep)
}

// Sampler holds a K3 assistant turn to a plan (Turn.Answer,
// Turn.ToolCall). Where the model is free (thinking, the answer before a
// required call) it may write no control token but <|close|> (no tag, no
// end of the turn), and its <|close|> begins the planned exit, which the sampler then writes. In JSON only
// tokens that keep the JSON a valid prefix are allowed; a complete value
// is followed by the next planned markup. When the remaining budget only
// just fits what the plan still needs, the sampler leaves the free part
// and writes the shortest JSON completion.
//
// Unlike engine samplers it keeps state: Pick must be called once per
// position, in order (a position again with the same logits gives the
// same token), which the engine does for a sampler that says Ordered.
type Sampler struct {
	tn      *Turn
	base    Picker
	plan    Plan
	cur     int
	c       *Constraint // the current JSON phase's
	st      *State
	text    []byte // the current JSON phase's bytes
	forced  []int  // being written
	then    int    // the phase after forced (a choice's way)
	calls   int    // calls begun (index phases entered)
	budget  int    // tokens the turn may have (0: no limit)
	n       int    // tokens picked
	lastPos int
	lastID  int
	masked  []float32
}

// Ordered says the sampler keeps state (engine.Ordered): the engine asks
// it once per position, in order, and never about a draft model's logits,
// so drafting may stay on.
func (s *Sampler) Ordered() bool { return true }

// NewSampler returns a sampler for plan. base picks among the allowed
// tokens (nil: the argmax); budget is the turn's token cap. A nil plan
// gives nil.
func NewSampler(tn *Turn, plan Plan, base Picker, budget int) *Sampler {
	if plan == nil {
		return nil
	}
	for i := range plan {
		switch {
		case plan[i].alts != nil: // the way that ends the turn
			plan[i].min = len(plan[i].alts[len(plan[i].alts)-1])
		case plan[i].free:
			plan[i].min = len(plan[i].forced)
		case plan[i].schema != nil:
			plan[i].min = len(plan[i].schema.mini)
		case plan[i].forced == nil: // chosen later: the longest of the choices
			for k := range i {
				for _, s := range plan[k].choose {
					plan[i].min = max(plan[i].min, len(s.mini))
				}
			}
		default:
			plan[i].min = len(plan[i].forced)
		}
	}
	s := &Sampler{tn: tn, base: base, plan: plan, budget: budget, lastPos: -1, cur: -1, then: -1}
	s.enter(0)
	return s
}

func (s *Sampler) enter(i int) {
	s.cur = i
	if i >= len(s.plan) {
		return
	}
	p := s.plan[i]
	switch {
	case p.free, p.alts != nil:
	case p.index:
		s.calls++
		s.forced = s.tn.callIndex(s.calls)
	case p.forced != nil:
		s.forced = p.forced
	default:
		sch := p.schema
		if sch == nil { // chosen by the text of the last JSON phase that chooses
			var name string
			_ = json.Unmarshal(s.text, &name)
			for k := i - 1; k >= 0 && sch == nil; k-- {
				sch = s.plan[k].choose[name]
			}
			if sch == nil {
				sch = AnyObject()
			}
		}
		s.c, s.st, s.text = s.tn.constraint(sch), Start(sch), nil
	}
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

// need is the tokens the plan needs at least after the current phase (up
// to a choice, whose least is its way that ends the turn).
func (s *Sampler) need() int {
	n := spare
	for _, p := range s.plan[min(s.cur+1, len(s.plan)):] {
		n += p.min
		if p.alts != nil {
			break
		}
	}
	return n
}

func (s *Sampler) remaining() int {
	if s.budget <= 0 {
		return math.MaxInt32
	}
	return s.budget - s.n
}

func (s *Sampler) choose(pos int, logits []float32) int {
	if s.cur >= len(s.plan) {
		return s.tn.EndOfMsg
	}
	p := s.plan[s.cur]
	switch {
	case s.forced != nil:
		return s.forced[0]
	case p.free:
		if !p.lazy && s.remaining() <= len(p.forced)+s.need() {
			return p.forced[0]
		}
		return s.pick(pos, logits, func(id int) bool {
			return !s.tn.V.special[id] || id == p.forced[0] || p.lazy && s.tn.ends(id)
		})
	case p.alts != nil:
		exit := p.alts[len(p.alts)-1]
		if s.remaining() <= len(exit)+s.callCost()+len(p.alts[0])+spare {
			return exit[0] // no room for another call
		}
		return s.pick(pos, logits, func(id int) bool {
			for _, a := range p.alts {
				if id == a[0] {
					return true
				}
			}
			return false
		})
	}
	next := s.nextForced()
	if s.st.Done() {
		return next[0]
	}
	comp := s.st.Completion()
	if s.remaining() <= len(comp)+s.need() {
		return s.pick(pos, logits, func(id int) bool {
			b := s.tn.V.tokens[id]
			return !s.tn.V.special[id] && len(b) > 0 && bytes.HasPrefix(comp, b)
		})
	}
	mask := s.c.Mask(s.st)
	complete := s.st.Complete()
	return s.pick(pos, logits, func(id int) bool {
		return mask[id/64]&(1<<(id%64)) != 0 || complete && id == next[0]
	})
}

// nextForced is the sequence the phase after the current one writes
// first (an index phase: with the next call's number).
func (s *Sampler) nextForced() []int {
	p := s.plan[s.cur+1]
	if p.index {
		return s.tn.callIndex(s.calls + 1)
	}
	return p.forced
}

// callCost is the least a further call needs: the phases from its name
// to the close of its arguments (the choice's first way leads to them).
func (s *Sampler) callCost() int {
	n := 0
	for _, p := range s.plan[s.plan[s.cur].to[0]:] {
		if p.alts != nil {
			break
		}
		n += p.min
	}
	return n
}

// pick draws among the allowed ids: the argmax, or base on the logits with
// the others at -Inf (the renormalised distribution of the allowed ids,
// with the same random number per position).
func (s *Sampler) pick(pos int, logits []float32, ok func(int) bool) int {
	n := min(len(logits), s.tn.V.Size())
	if cap(s.masked) < len(logits) {
		s.masked = make([]float32, len(logits))
	}
	m := s.masked[:len(logits)]
	best := -1
	for id := range logits {
		if id < n && ok(id) {
			m[id] = logits[id]
			if best < 0 || logits[id] > logits[best] {
				best = id
			}
		} else {
			m[id] = float32(math.Inf(-1))
		}
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
	if s.cur >= len(s.plan) {
		return
	}
	p := s.plan[s.cur]
	switch {
	case s.forced != nil:
		s.forced = s.forced[1:]
		if len(s.forced) == 0 {
			s.forced = nil
			next := s.cur + 1
			if s.then >= 0 {
				next, s.then = s.then, -1
			}
			s.enter(next)
		}
	case p.alts != nil:
		for k, a := range p.alts {
			if id == a[0] {
				s.forced, s.then = a[1:], p.to[k]
				if len(s.forced) == 0 {
					s.forced, s.then = nil, -1
					s.enter(p.to[k])
				}
				return
			}
		}
	case p.free:
		if p.lazy && s.tn.ends(id) { // the model ended the turn
			s.enter(len(s.plan))
		} else if id == p.forced[0] {
			s.forced = p.forced[1:]
			if len(s.forced) == 0 {
				s.forced = nil
				s.enter(s.cur + 1)
			}
		}
	default: // JSON
		// the value is whole (only markup may follow), or complete and the
		// model chose the markup
		if s.st.Done() || id == s.nextForced()[0] && s.tn.V.special[id] {
			s.enter(s.cur + 1)
			s.advance(id)
			s.n--
			return
		}
		if id >= 0 && id < s.tn.V.Size() && !s.tn.V.special[id] {
			s.st.Feed(s.tn.V.tokens[id])
			s.text = append(s.text, s.tn.V.tokens[id]...)
		}
	}
}
