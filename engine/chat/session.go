// Package chat runs multi-turn Kimi K3 conversations on an engine: it
// renders the transcript in the XTML chat format, reuses the engine state of
// the previous turn when the new transcript starts with the ids already fed,
// samples the reply, streams it as reasoning and answer text, and keeps the
// history (JSONL). It assumes nothing about a terminal: the CLI REPL and the
// desktop app drive the same Session.
package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k3/engine"
	"k3/tokenizer"
)

// Options control one turn.
type Options struct {
	System      string  // system prompt, sent first when not empty
	NoThink     bool    // thinking off: the reply opens the response channel
	Effort      string  // thinking effort: low, high or max (default)
	Greedy      bool    // argmax, whatever the temperature
	Temperature float64 // 0: greedy
	TopP        float64
	TopK        int
	Seed        uint64
	MaxTokens   int // turn cap, thinking included (default 4096)
}

// Event kinds.
const (
	EventPrefill   = "prefill"   // Done of Total prompt positions read (Reused were already in the state)
	EventReasoning = "reasoning" // Text: a piece of the think channel
	EventAnswer    = "answer"    // Text: a piece of the response channel
	EventTool      = "tool"      // Text: a piece of a tool call
	EventToken     = "token"     // one token generated: Step, Seconds, Stats
)

// Event is a streamed update of a turn.
type Event struct {
	Kind        string
	Text        string
	Done, Total int
	Reused      int
	Step        int
	Seconds     float64
	Stats       engine.Stats
}

// Reply is a finished (or cut) assistant turn.
type Reply struct {
	Reasoning, Content string
	ToolCalls          []tokenizer.ToolCall
	Cut                string // "", "stopped" or "turn cap"
	IDs                []int  // the generated ids
	Tokens             int
	Reused, Prefilled  int // prompt positions reused from the state / read this turn
	FirstTokenSeconds  float64
	SecondsPerToken    float64
}

// Session is one conversation.
type Session struct {
	E   *engine.Engine
	Tok *tokenizer.Tokenizer
	// History is the conversation so far (without the system prompt).
	History []Message
	// HistoryPath, when set, is where the history is written after every turn.
	HistoryPath string

	live *engine.State // after the last turn: everything fed
	snap *engine.State // the last turn's prompt minus its final position
}

// NewSession starts an empty conversation.
func NewSession(e *engine.Engine, tok *tokenizer.Tokenizer) *Session {
	return &Session{E: e, Tok: tok}
}

// Reset forgets the conversation and the engine state.
func (s *Session) Reset() {
	s.History, s.live, s.snap = nil, nil, nil
}

func (s *Session) transcript(opt Options) ([]int, error) {
	var msgs []tokenizer.Message
	if opt.System != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: opt.System})
	}
	for _, m := range s.History {
		msgs = append(msgs, tokenizer.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent})
	}
	segs, err := tokenizer.Render(msgs, nil, tokenizer.RenderOptions{NoThink: opt.NoThink, ThinkingEffort: opt.Effort})
	if err != nil {
		return nil, err
	}
	return s.Tok.EncodeSegments(segs), nil
}

// Prompt returns the ids a turn would feed after adding user text (for tests
// and tools: a fresh run over this gives the same reply).
func (s *Session) Prompt(user string, opt Options) ([]int, error) {
	saved := s.History
	s.History = append(slices.Clip(s.History), Message{Role: "user", Content: user})
	defer func() { s.History = saved }()
	return s.transcript(opt)
}

// Turn adds the user's message, generates the reply and returns it. The
// reply is streamed to on. Cancelling ctx stops after the token in flight;
// the partial reply is kept in the history, marked "stopped".
func (s *Session) Turn(ctx context.Context, user string, opt Options, on func(Event)) (*Reply, error) {
	if on == nil {
		on = func(Event) {}
	}
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = 4096
	}
	s.History = append(s.History, Message{Role: "user", Content: user})
	ids, err := s.transcript(opt)
	if err != nil {
		s.History = s.History[:len(s.History)-1]
		return nil, err
	}
	// reuse the longest state whose ids start the transcript (leaving at
	// least one position to feed, whose logits choose the first token)
	st := s.E.M.NewState()
	for _, cand := range []*engine.State{s.live, s.snap} {
		if cand != nil && cand.Pos < len(ids) && slices.Equal(cand.IDs, ids[:cand.Pos]) && cand.Pos > st.Pos {
			st = cand
		}
	}
	if st == s.live {
		s.live = nil
	}
	if st == s.snap {
		st = st.Clone()
	}
	rep := &Reply{Reused: st.Pos, Prefilled: len(ids) - st.Pos}
	prevObs := s.E.Observe
	defer func() { s.E.Observe = prevObs }()
	reused := st.Pos
	s.E.Observe = func(ev engine.Event) {
		if ev.Kind == engine.EventPrefill {
			on(Event{Kind: EventPrefill, Done: reused + ev.Done, Total: len(ids), Reused: reused, Stats: ev.Stats})
		}
	}
	t0 := time.Now()
	if _, err := s.E.Feed(st, ids[st.Pos:len(ids)-1], false); err != nil {
		return nil, err
	}
	s.snap = st.Clone()
	logits, err := s.E.Feed(st, ids[len(ids)-1:], false)
	if err != nil {
		return nil, err
	}
	s.E.Observe = nil
	on(Event{Kind: EventPrefill, Done: len(ids), Total: len(ids), Reused: reused, Stats: s.E.Snapshot()})

	turnIndex := 0
	for _, m := range s.History {
		if m.Role == "user" {
			turnIndex++
		}
	}
	smp := &engine.Sampler{Greedy: opt.Greedy, Temperature: opt.Temperature, TopP: opt.TopP, TopK: opt.TopK,
		Rand: engine.NewPCG32(opt.Seed, uint64(turnIndex))}
	stops := s.Tok.StopIDs()
	sm := newStreamer(s.Tok, !opt.NoThink, on)
	var gen []int
	tStep := time.Now()
	for {
		id := smp.Pick(logits)
		gen = append(gen, id)
		now := time.Now()
		if len(gen) == 1 {
			rep.FirstTokenSeconds = now.Sub(t0).Seconds()
		}
		sm.add(id)
		on(Event{Kind: EventToken, Step: len(gen) - 1, Seconds: now.Sub(tStep).Seconds(), Stats: s.E.Snapshot()})
		tStep = now
		if slices.Contains(stops, id) {
			break
		}
		if len(gen) >= opt.MaxTokens {
			rep.Cut = "turn cap"
			break
		}
		if ctx != nil && ctx.Err() != nil {
			rep.Cut = "stopped"
			break
		}
		if logits, err = s.E.Feed(st, []int{id}, false); err != nil {
			s.finish(rep, sm, gen, opt)
			return rep, err
		}
	}
	s.live = st
	s.finish(rep, sm, gen, opt)
	if n := len(gen); n > 1 {
		rep.SecondsPerToken = (time.Since(t0).Seconds() - rep.FirstTokenSeconds) / float64(n-1)
	}
	if s.HistoryPath != "" {
		if err := SaveHistory(s.HistoryPath, s.History); err != nil {
			return rep, fmt.Errorf("history: %w", err)
		}
	}
	return rep, nil
}

// finish parses the generated ids (or keeps what streamed when the turn was
// cut) and appends the assistant message to the history.
func (s *Session) finish(rep *Reply, sm *streamer, gen []int, opt Options) {
	sm.flush()
	rep.Tokens = len(gen)
	rep.IDs = gen
	a, err := s.Tok.ParseAssistantIDs(gen, !opt.NoThink)
	if err == nil && rep.Cut == "" {
		rep.Reasoning, rep.Content, rep.ToolCalls = a.Reasoning, a.Content, a.ToolCalls
	} else {
		// cut, or ended by a stop token without the expected structure: keep
		// what streamed, channel by channel
		rep.Reasoning, rep.Content = sm.reasoning.String(), sm.answer.String()
	}
	s.History = append(s.History, Message{Role: "assistant", Content: rep.Content, ReasoningContent: rep.Reasoning, Cut: rep.Cut})
}

// streamer turns generated ids into reasoning/answer text as they come:
// control tokens and the tag names between <|open|>/<|close|> and <|sep|>
// are structure, everything else is text of the current channel.
type streamer struct {
	tok               *tokenizer.Tokenizer
	on                func(Event)
	kind              string
	inTag, opening    bool
	tag               []int
	dec               *tokenizer.StreamDecoder
	reasoning, answer strings.Builder
}

func newStreamer(tok *tokenizer.Tokenizer, thinking bool, on func(Event)) *streamer {
	k := EventAnswer
	if thinking {
		k = EventReasoning
	}
	return &streamer{tok: tok, on: on, kind: k, dec: tok.NewStreamDecoder()}
}

func (m *streamer) emit(text string) {
	if text == "" {
		return
	}
	switch m.kind {
	case EventReasoning:
		m.reasoning.WriteString(text)
	case EventAnswer:
		m.answer.WriteString(text)
	}
	m.on(Event{Kind: m.kind, Text: text})
}

func (m *streamer) flush() { m.emit(m.dec.Flush()) }

func (m *streamer) add(id int) {
	if !m.tok.IsSpecial(id) {
		if m.inTag {
			m.tag = append(m.tag, id)
			return
		}
		m.emit(m.dec.Add(id))
		return
	}
	switch m.tok.SpecialName(id) {
	case tokenizer.Open, tokenizer.Close:
		m.flush()
		m.inTag, m.opening, m.tag = true, m.tok.SpecialName(id) == tokenizer.Open, m.tag[:0]
	case tokenizer.Sep:
		if !m.inTag {
			return
		}
		m.inTag = false
		name := strings.Fields(string(m.tok.Decode(m.tag)) + " ")[0]
		switch {
		case m.opening && name == "response":
			m.kind = EventAnswer
		case m.opening && (name == "tools" || name == "call" || name == "argument" || name == "json"):
			m.kind = EventTool
		case !m.opening && name == "think":
			m.kind = ""
		}
	}
}

// ErrNoTokenizer is returned when a model directory has no tokenizer files.
var ErrNoTokenizer = errors.New("no tokenizer")
