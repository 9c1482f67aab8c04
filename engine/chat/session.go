// Package chat runs multi-turn Kimi K3 conversations on an engine: it
// renders the transcript in the XTML chat format, reuses the engine state of
// the previous turn when the new transcript starts with the ids already fed,
// samples the reply, streams it as reasoning and answer text, and keeps the
// history (JSONL files; a folder of them is a Store, the app's
// conversations). It assumes nothing about a terminal: the CLI REPL (Turn)
// and the desktop app (Reply) drive the same Session.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"k3/engine"
	"k3/engine/plan"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// Options control one turn. They are also a conversation's own settings,
// kept as JSON beside its history (Store.SaveOptions): the system prompt
// is then the history's first message, and Spec is not kept.
type Options struct {
	System string `json:"-"` // system prompt, sent first when not empty
	// Thinking: the reply thinks first (off: it opens the response channel).
	Thinking bool   `json:"thinking"`
	Effort   string `json:"effort"` // thinking effort: low, high or max (default)
	// MaxTokens caps the reply, thinking included (0: DefaultMaxTokens).
	MaxTokens int `json:"max_tokens"`
	// Spec is speculative decoding (engine.SpecAuto by default); the reply
	// is the same whatever it is.
	Spec engine.Spec `json:"-"`
	// ResponseFormat, when set, is an OpenAI response_format object
	// (json_object, or json_schema in the strict subset): the answer is
	// held to it token by token, as k3 serve does (structured.go).
	ResponseFormat  json.RawMessage `json:"response_format,omitempty"`
	engine.Sampling `json:"sampling"`
}

// DefaultMaxTokens is the reply cap when Options.MaxTokens is 0.
const DefaultMaxTokens = 4096

// Reply is a finished (or cut) assistant turn.
type Reply struct {
	Reasoning, Content string
	ToolCalls          []xtml.ToolCall
	// Warnings say what the reply reader read loosely or left out.
	Warnings []string
	// ReasoningTokens counts the think channel's text tokens.
	ReasoningTokens int
	Stop            engine.StopReason
	IDs             []int // the generated ids
	// Written is IDs split into the think channel's and the answer's text
	// (nil for a reply not written plainly): the history keeps them.
	Written           *Written
	Reused, Prefilled int // prompt positions reused from the state / read this turn
	FirstTokenSeconds float64
	SecondsPerToken   float64
}

func (r *Reply) set(t xtml.Reply) {
	r.Reasoning, r.Content, r.ToolCalls = t.Reasoning, t.Content, t.ToolCalls
	r.Warnings, r.ReasoningTokens = t.Warnings, t.ReasoningTokens
}

// Cut is how the history marks the reply: "" when it ended by itself.
func (r *Reply) Cut() Cut { return cutOf(r.Stop) }

// Session runs a conversation's replies on an engine. Reply takes the
// whole transcript each time (the caller owns it: the app edits, forks and
// switches conversations); the session keeps only engine states, and reuses
// the longest one the new transcript starts with. Turn is the REPL's way:
// a transcript the session keeps (History, SetHistory), one user message
// at a time.
type Session struct {
	Engine *engine.Engine
	Tok    *tokenizer.Tokenizer
	// HistoryPath, when set, is where Turn writes the history after every turn.
	HistoryPath string
	// Checkpoints is how many user messages keep a copy of the engine state
	// from just before them (the last ones; 0: none). Editing one of them and
	// sending it again (the transcript cut there, then Reply) reads only the
	// edited message instead of the whole transcript. Each copy costs a
	// state: CheckpointBytes says how much they hold.
	Checkpoints int
	// Cache, when set, is the prompt cache (engine/promptcache): a reply
	// resumes from its longest snapshot of the transcript when that is
	// longer than what the session keeps, and keeps snapshots at the
	// transcript's message boundaries, so another session or process with
	// the same start reads only the rest.
	Cache engine.PromptCache

	history []Message // Turn's conversation so far
	// part is the cache partition the kept states below were made for:
	// another partition's transcript never resumes from them
	part string

	live  *engine.State   // after the last turn: everything fed
	snap  *engine.State   // the last turn's prompt minus its final position
	marks []*engine.State // the checkpoints, oldest first
	// noSnapshot: keep no snap (FitBudget at the smallest presets)
	noSnapshot bool

	attached [][]byte         // pictures for Turn's next user message (Attach)
	images   map[uint64]Image // pictures prepared, by content key
}

// DefaultCheckpoints is NewSession's Checkpoints (plan.DefaultChatCheckpoints).
const DefaultCheckpoints = plan.DefaultChatCheckpoints

// FitBudget sets what the session keeps besides its live state for a run
// opened with o (plan.ChatCopiesAt its floor, Options.Floor): a streamed run at the
// smallest presets keeps no snapshot and no checkpoints; a model without a
// packed trunk is all in memory, and small, so it keeps them. The run's
// plan reserves them: o.StateCopies = StateCopies(o).
func (s *Session) FitBudget(o engine.Options) {
	snap, n := plan.ChatCopiesAt(o.Floor())
	s.noSnapshot, s.Checkpoints = !snap, n
}

// StateCopies is how many copies of the engine state a session fitted to a
// run opened with o keeps (FitBudget).
func StateCopies(o engine.Options) int { return plan.ChatStateCopiesAt(o.Floor()) }

// NewSession starts an empty conversation.
func NewSession(e *engine.Engine, tok *tokenizer.Tokenizer) *Session {
	return &Session{Engine: e, Tok: tok, Checkpoints: DefaultCheckpoints}
}

// Reset forgets the conversation and the engine state.
func (s *Session) Reset() {
	s.history, s.live, s.snap, s.marks = nil, nil, nil, nil
}

// History is a copy of Turn's conversation so far.
func (s *Session) History() []Message { return slices.Clone(s.history) }

// SetHistory makes h (copied) the conversation Turn continues.
func (s *Session) SetHistory(h []Message) { s.history = slices.Clone(h) }

// CheckpointBytes is the memory the checkpoints hold.
func (s *Session) CheckpointBytes() int64 {
	var n int64
	for _, m := range s.marks {
		n += m.Bytes()
	}
	return n
}

// userStart is where the last message of history (the user's) starts in
// the transcript ids of this turn: the length of the transcript before it,
// or -1 when that is not a prefix of ids (a renderer that reorders).
func (s *Session) userStart(history []Message, ids []int, opt Options) int {
	before, _, err := s.render(history[:len(history)-1], opt, true)
	if err != nil || len(before) >= len(ids) || !slices.Equal(before, ids[:len(before)]) {
		return -1
	}
	return len(before)
}

// keepMark adds a checkpoint (the session owns st from then on), dropping
// the oldest past Checkpoints.
func (s *Session) keepMark(st *engine.State) {
	for _, m := range s.marks {
		if m.Pos == st.Pos && slices.Equal(m.IDs, st.IDs) {
			return
		}
	}
	s.marks = append(s.marks, st)
	if n := len(s.marks) - s.Checkpoints; n > 0 {
		s.marks = slices.Delete(s.marks, 0, n)
	}
}

// render encodes the system prompt and history, with the generation prompt
// unless noGen. A history that starts with a system message has its own
// system prompt: opt.System is then not sent.
func (s *Session) render(history []Message, opt Options, noGen bool) ([]int, []Image, error) {
	var msgs []xtml.Message
	if opt.System != "" && (len(history) == 0 || history[0].Role != "system") {
		msgs = append(msgs, xtml.Message{Role: "system", Content: opt.System})
	}
	var images []Image
	for _, m := range history {
		xm := m.Rendered()
		useWritten(s.Tok, m, &xm)
		if len(m.Images) > 0 {
			text := xm.Parts
			if text == nil {
				text = []xtml.Part{{Text: m.Content}}
			}
			xm.Parts = nil
			for _, data := range m.Images {
				im, err := s.image(data)
				if err != nil {
					return nil, nil, err
				}
				images = append(images, im)
				xm.Parts = append(xm.Parts, xtml.Part{Image: im.Size()})
			}
			xm.Parts = append(xm.Parts, text...)
		}
		msgs = append(msgs, xm)
	}
	segs, err := xtml.Render(msgs, nil, xtml.RenderOptions{NoThink: !opt.Thinking, ThinkingEffort: opt.Effort, NoGenerationPrompt: noGen,
		ResponseFormat: opt.ResponseFormat})
	if err != nil {
		return nil, nil, err
	}
	ids, err := ExpandImages(s.Tok, xtml.Encode(s.Tok, segs), images)
	return ids, images, err
}

// Prompt returns the ids a turn would feed after adding user text to Turn's
// conversation (for tests and tools: a fresh run over this gives the same
// reply).
func (s *Session) Prompt(user string, opt Options) ([]int, error) {
	ids, _, err := s.render(append(slices.Clip(s.history), Message{Role: "user", Content: user, Images: s.attached}), opt, false)
	return ids, err
}

// Reply generates the assistant's reply to history, a whole transcript
// that ends with the user's message (a leading system message is its
// system prompt, else opt.System), with the engine's Generate, and returns
// it; history is not changed or kept. on receives prefill progress, the
// reply's text by channel and one event per token; its first event,
// before anything is read, is Opening's (as Generate's). Cancelling ctx
// stops within one layer's work, during the prompt too; Reply then returns
// the partial reply, marked "stopped" (Reply.Cut), with no error.
func (s *Session) Reply(ctx context.Context, history []Message, opt Options, on func(engine.Event)) (*Reply, error) {
	if on == nil {
		on = func(engine.Event) {}
	}
	if len(history) == 0 || history[len(history)-1].Role != "user" {
		return nil, errors.New("the conversation must end with the user's message")
	}
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = DefaultMaxTokens
	}
	ids, images, err := s.render(history, opt, false)
	if err != nil {
		return nil, err
	}
	turnIndex := 0
	for _, m := range history {
		if m.Role == "user" {
			turnIndex++
		}
	}
	sampler, spec, err := s.turnSampling(opt, uint64(turnIndex))
	if err != nil {
		return nil, err
	}
	mark := -1
	if s.Checkpoints > 0 {
		mark = s.userStart(history, ids, opt)
	}
	po := PromptOptions{Thinking: opt.Thinking, MaxTokens: opt.MaxTokens, Sampler: sampler, Spec: spec, Images: images}
	on(s.Opening(ids, po))
	rep, sm, gen, err := s.run(ctx, ids, mark, po, on)
	rep.IDs, rep.Written = gen, writtenIDs(s.Tok, gen, opt.Thinking)
	rep.set(sm.finish())
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return rep, err
}

// Pending says what Reply would read for history before it reads
// anything: the transcript's positions (total) and how many of them a
// state the session keeps already holds (reused). The app shows "reading
// prompt 0/total" from the moment a message is sent with it, not only once
// the first chunk was read. (Generate sends the same as its first event:
// Opening.)
func (s *Session) Pending(history []Message, opt Options) (reused, total int, err error) {
	ids, images, err := s.render(history, opt, false)
	if err != nil {
		return 0, 0, err
	}
	return s.startsFrom(ids, PromptOptions{Images: images}), len(ids), nil
}

// Opening is the prefill event a reply over ids sends before it reads
// anything (Generate's first event): Done and Reused the positions a state
// the session keeps already holds, of Total, with the positions read per
// pass and the engine's counters. A server's watchers say what reading
// the prompt takes from the request's start with it, as the app's chat
// does with Pending, not only once the first pass was read.
func (s *Session) Opening(ids []int, o PromptOptions) engine.Event {
	r := s.startsFrom(ids, o)
	return engine.Event{Kind: engine.EventPrefill, Done: r, Total: len(ids), Reused: r,
		Chunk: s.Engine.Model().Chunk(), Stats: s.Engine.Snapshot(), At: time.Now()}
}

// startsFrom is how many positions of ids a reply would not read again:
// those of the state startState would start from (none of another
// partition's).
func (s *Session) startsFrom(ids []int, o PromptOptions) int {
	if o.Partition != s.part {
		return 0
	}
	if st := s.reusable(ids, mediaKeys(o.Images)); st != nil {
		return st.Pos
	}
	return 0
}

// reusable is the longest state the session keeps whose ids (and
// pictures, keys) start the transcript's, leaving at least one position to
// feed (whose logits choose the first token); nil when none does.
func (s *Session) reusable(ids []int, keys []engine.MediaKey) *engine.State {
	var best *engine.State
	for _, cand := range append([]*engine.State{s.live, s.snap}, s.marks...) {
		if cand != nil && cand.Pos > 0 && cand.Pos < len(ids) && (best == nil || cand.Pos > best.Pos) &&
			slices.Equal(cand.IDs, ids[:cand.Pos]) && cand.MediaAgrees(keys) {
			best = cand
		}
	}
	return best
}

// Message is the reply as the history keeps it.
func (r *Reply) Message() Message {
	return Message{Role: "assistant", Content: r.Content, ReasoningContent: r.Reasoning, Cut: r.Cut(), Written: r.Written}
}

// Turn adds the user's message to the conversation the session keeps
// (History), generates the reply (Reply) and adds it too, then writes the
// history to HistoryPath when set. A stopped reply is kept, marked
// "stopped", and Turn returns it with no error.
func (s *Session) Turn(ctx context.Context, user string, opt Options, on func(engine.Event)) (*Reply, error) {
	h := append(slices.Clip(s.history), Message{Role: "user", Content: user, Images: s.attached})
	rep, err := s.Reply(ctx, h, opt, on)
	if rep != nil {
		s.attached = nil // they went with this message
	}
	if rep == nil {
		return nil, err
	}
	s.history = append(h, rep.Message())
	if err != nil {
		return rep, err
	}
	if s.HistoryPath != "" {
		if err := SaveHistory(s.HistoryPath, s.history); err != nil {
			var ce *ConflictError
			if errors.As(err, &ce) {
				s.HistoryPath = ce.SavedAs // the next turns continue there
			}
			return rep, fmt.Errorf("history: %w", err)
		}
	}
	return rep, nil
}

// PromptOptions control Generate.
type PromptOptions struct {
	Thinking  bool // the transcript's generation prompt opened the think channel
	MaxTokens int  // the reply cap (0: DefaultMaxTokens)
	Sampler   engine.Sampler
	Spec      engine.Spec // speculative decoding (the zero value: engine.SpecAuto)
	// Stop, when set, is asked after each token, once the token's text went
	// to on; true ends the reply there (engine.StopCaller).
	Stop func() bool
	// NoTools: tool calls were not asked for (no tools declared, or
	// tool_choice "none"); the ones the model writes are left out, with a
	// warning saying NoToolsWhy (xtml.ReplyOptions).
	NoTools    bool
	NoToolsWhy string
	// Partition is whose transcript this is (a server's client key): the
	// states kept for another partition, and its cache snapshots, are
	// never reused for it.
	Partition string
	// Images are the transcript's pictures in order, their pads already
	// expanded in the ids (ExpandImages): each pad position reads its
	// image's projected row. A reused state must have fed the same
	// pictures at the same positions.
	Images []Image
}

// Generate runs one assistant reply over ids, a whole transcript rendered
// by the caller and ending with the generation prompt, reusing the engine
// state of the previous reply (of Generate or Turn) when ids start with
// what was fed. It streams like Turn, returns the reply as the reply
// reader read it (text, tool calls, warnings: what streamed) and leaves
// the history alone: a server renders each request's messages itself.
// Its first event, before anything is read, is Opening's.
func (s *Session) Generate(ctx context.Context, ids []int, o PromptOptions, on func(engine.Event)) (*Reply, error) {
	if on == nil {
		on = func(engine.Event) {}
	}
	on(s.Opening(ids, o))
	rep, sm, gen, err := s.run(ctx, ids, -1, o, on)
	rep.IDs = gen
	rep.set(sm.finish())
	return rep, err
}

// run feeds ids on the longest reusable state and generates the reply,
// in one engine.Generate. With mark >= 0 (where the user's message starts
// in ids) the state there is kept as a checkpoint on the way, and above
// the memory floor the state before the last position as the snapshot:
// both are taken inside the passes that read the transcript
// (GenOptions.Checkpoint, KeepPrefix), so neither costs a pass.
func (s *Session) run(ctx context.Context, ids []int, mark int, o PromptOptions, on func(engine.Event)) (*Reply, *streamer, []int, error) {
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	st := s.startState(ids, o)
	reused := st.Pos
	rep := &Reply{Reused: reused, Prefilled: len(ids) - reused}
	if err := s.giveImages(ctx, st, o.Images, on); err != nil {
		if errors.Is(err, context.Canceled) {
			rep.Stop = engine.StopCancelled // stopped while the tower looked at a picture
		}
		return rep, newStreamer(s.Tok, xtml.ReplyOptions{Thinking: o.Thinking}, on), nil, err
	}
	sm := newStreamer(s.Tok, xtml.ReplyOptions{Thinking: o.Thinking, NoTools: o.NoTools, NoToolsWhy: o.NoToolsWhy}, on)
	// prefill progress counts the whole transcript, what was reused (kept
	// by the session or found in the prompt cache) included
	progress := func(base int) func(engine.Event) {
		held := rep.Reused
		return func(ev engine.Event) {
			if ev.Kind == engine.EventPrefill {
				ev.Done += base
				ev.Total = len(ids)
				ev.Reused += held
			}
			on(ev)
			if ev.Kind == engine.EventToken {
				sm.add(ev.Token)
			}
		}
	}
	// the checkpoint where the user's message starts is kept on the way,
	// inside the passes that read the transcript
	checkpoint := 0
	if mark > 0 && mark >= reused && mark < len(ids) {
		checkpoint = mark
	}
	var onToken func(engine.Event) bool
	if o.Stop != nil {
		onToken = func(engine.Event) bool { return o.Stop() }
	}
	// each copy replaces the one it supersedes as soon as it is taken, so
	// the old ones are not held beside it through the decoding
	kept := func(st *engine.State, prefix bool) {
		if prefix {
			s.snap = st
		} else {
			s.keepMark(st)
		}
	}
	res, err := s.Engine.Generate(ctx, st, ids[reused:], engine.GenOptions{
		MaxTokens: o.MaxTokens, StopIDs: s.Tok.StopIDs(), Sampler: o.Sampler, KeepPrefix: !s.noSnapshot, Checkpoint: checkpoint, OnKept: kept,
		OnToken: onToken, Spec: o.Spec, OnEvent: progress(reused), Cache: s.cacheUse(ids, o, checkpoint)})
	rep.Reused += res.Reused
	rep.Prefilled -= res.Reused
	rep.Stop = res.Stop
	if err != nil && !errors.Is(err, context.Canceled) {
		return rep, sm, res.Generated, err
	}
	rep.setTimes(res.StepSeconds)
	// a stopped turn's state holds whole chunks of the prompt (and tokens):
	// a prefix the next transcript can still reuse
	s.live = res.State
	return rep, sm, res.Generated, err
}

// startState is the state a turn over ids starts from: the longest state
// whose ids start the transcript (leaving at least one position to feed,
// whose logits choose the first token), the live one taken over, the
// snapshot or a checkpoint cloned; a new state when none fits. Another
// partition drops the states kept for the last one.
func (s *Session) startState(ids []int, o PromptOptions) *engine.State {
	if o.Partition != s.part {
		s.live, s.snap, s.marks, s.part = nil, nil, nil, o.Partition
	}
	st := s.reusable(ids, mediaKeys(o.Images))
	if st == nil {
		st = s.Engine.Model().NewState()
	}
	if st != s.live && st.Pos > 0 {
		st = st.Clone() // the snapshot or a checkpoint stays as it is
	}
	// the live state is taken over, or it does not fit this transcript: it
	// is not held beside the one the reply reads into (a whole state, its
	// MLA rows allocated for the planned context; the floor plans one)
	s.live = nil
	return st
}

// setTimes sets the reply's first-token time (the first step's, the
// prompt's read included) and its mean time per later token.
func (r *Reply) setTimes(steps []float64) {
	if len(steps) > 0 {
		r.FirstTokenSeconds = steps[0]
		if n := len(steps); n > 1 {
			r.SecondsPerToken = (sum(steps) - steps[0]) / float64(n-1)
		}
	}
}

// cacheUse is a reply's use of the prompt cache (nil without one): marks
// at the transcript's message boundaries and where the user's message
// starts (checkpoint, 0: none), so a new conversation with the same
// preamble resumes after it.
func (s *Session) cacheUse(ids []int, o PromptOptions, checkpoint int) *engine.CacheUse {
	if s.Cache == nil {
		return nil
	}
	marks := engine.MessageMarks(ids, 0, s.Tok.StopIDs())
	if checkpoint > 0 {
		marks = append(marks, checkpoint)
	}
	return &engine.CacheUse{Cache: s.Cache, Partition: o.Partition, Marks: marks}
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// streamer reads the generated ids with the tokenizer's reply reader and
// passes its events on as engine events: reasoning and answer text, and
// each finished tool call as EventTool text ("name arguments").
type streamer struct {
	r  *xtml.ReplyReader
	on func(engine.Event)
}

func newStreamer(tok *tokenizer.Tokenizer, o xtml.ReplyOptions, on func(engine.Event)) *streamer {
	return &streamer{r: xtml.NewReplyReader(tok, o), on: on}
}

func (m *streamer) pass(evs []xtml.ReplyEvent) {
	for _, ev := range evs {
		switch ev.Kind {
		case xtml.ReplyReasoning:
			m.on(engine.Event{Kind: engine.EventReasoning, Text: ev.Text, At: time.Now()})
		case xtml.ReplyContent:
			m.on(engine.Event{Kind: engine.EventAnswer, Text: ev.Text, At: time.Now()})
		case xtml.ReplyToolEnd:
			m.on(engine.Event{Kind: engine.EventTool, Text: ev.Call.Function.Name + " " + ev.Call.Function.Arguments, At: time.Now()})
		}
	}
}

func (m *streamer) add(id int) { m.pass(m.r.Add(id)) }

// finish ends the reply and returns it as read.
func (m *streamer) finish() xtml.Reply {
	m.pass(m.r.Finish())
	return m.r.Reply()
}

// Replay reads generated ids as a session does, sending on the same
// events, and returns the reply it makes of them (for servers and tests
// that generate otherwise).
func Replay(tok *tokenizer.Tokenizer, gen []int, o xtml.ReplyOptions, on func(engine.Event)) xtml.Reply {
	if on == nil {
		on = func(engine.Event) {}
	}
	sm := newStreamer(tok, o, on)
	for _, id := range gen {
		sm.add(id)
	}
	return sm.finish()
}

// ApplySystem puts a system prompt (k3 chat --system) into a history, so it
// is rendered once and saved with the conversation: a history that starts
// with a system message keeps it when the text is the same, and has it
// replaced otherwise (replaced is then true: say so); a history without one
// gets it first. An empty system leaves the history as it is.
func ApplySystem(h []Message, system string) (out []Message, replaced bool) {
	if system == "" {
		return h, false
	}
	if len(h) > 0 && h[0].Role == "system" {
		if h[0].Content == system {
			return h, false
		}
		out = slices.Clone(h)
		out[0] = Message{Role: "system", Content: system}
		return out, true
	}
	return append([]Message{{Role: "system", Content: system}}, h...), false
}

// ResetKeepSystem forgets the conversation and the engine state but keeps
// the history's leading system message, as the conversation's setting.
func (s *Session) ResetKeepSystem() {
	var keep []Message
	if len(s.history) > 0 && s.history[0].Role == "system" {
		keep = []Message{s.history[0]}
	}
	s.Reset()
	s.history = keep
}
