package engine

import (
	"context"
	"slices"
	"time"

	"k3/kernels"
)

// StopReason says why generation ended.
type StopReason int

// Stop reasons.
const (
	StopLength    StopReason = iota // MaxTokens were generated (or none were asked for)
	StopToken                       // a stop token was generated (it is kept)
	StopCancelled                   // the context was cancelled
	StopCaller                      // OnToken asked to stop
)

var stopNames = [...]string{"length", "stop_id", "cancelled", "caller"}

// String is the reason as `k3 run --out` writes it.
func (r StopReason) String() string {
	if r >= 0 && int(r) < len(stopNames) {
		return stopNames[r]
	}
	return "unknown"
}

// MarshalText writes the reason as its name.
func (r StopReason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// GenOptions control Generate.
type GenOptions struct {
	MaxTokens int   // tokens to generate (0: prefill only)
	StopIDs   []int // stop after emitting one of these (it stays in the output)
	// Sampler picks each token; nil picks the argmax (the first index of the
	// maximum). An attached draft model also consults it: its drafts stop
	// where the target foreseeably samples another token (Draft.block).
	Sampler Sampler
	// Recompute runs the whole sequence every step instead of carrying state
	// (the same tokens, bit for bit; a check of the incremental path). The
	// state passed in is then left as it was.
	Recompute bool
	// OnToken is called after each generated token; returning true stops
	// generation (StopCaller).
	OnToken func(ev Event) (stop bool)
	// OnEvent receives prefill progress (per chunk) and token events.
	OnEvent func(Event)
	// KeepPrefix makes the result carry a copy of the state after all but
	// the last prompt position (a chat reuses it when the next transcript
	// re-renders the last reply).
	KeepPrefix bool
	// Checkpoint, when above 0, makes the result carry a copy of the state
	// after that position of the whole sequence (prior ids included; a
	// chat's edit checkpoint, where its last user message starts). Like
	// KeepPrefix's, the copy is taken inside the pass that reads the
	// position; there is none when the prompt cache resumed the prompt
	// past it, the prompt ends before it, or with Recompute and tokens to
	// generate.
	Checkpoint int
	// Complete also feeds the last generated token, so the state holds the
	// whole sequence (for saving it), after a cancel too.
	Complete bool
	// Spec is speculative decoding: SpecAuto (the zero value) drafts when
	// the measured costs say it pays, SpecOff never, a positive value
	// forces drafts of up to that many tokens (at most the model's
	// Options.MaxDraft and a prefill chunk less one). The tokens, logits
	// and state are the same whatever it is.
	Spec Spec
	// Trace, when set, holds hooks that measure or steer the generation
	// (k3 bench, tests).
	Trace *GenTrace
	// keepLogits makes the result carry the logits that chose every token
	// (tests).
	keepLogits bool
	// onDraft sees every draft a pass verifies (tests)
	onDraft func(draft []int)
	// Cache, when set, resumes the prompt from the longest snapshot the
	// prompt cache holds of it, and keeps snapshots of it on the way
	// (CacheUse). The tokens, logits and state are the same as without.
	Cache *CacheUse
}

// GenResult is the outcome of Generate.
type GenResult struct {
	Prior       []int // ids the state held before the call
	Prompt      []int
	Generated   []int
	FirstLogits []float32 // logits that chose the first generated token
	Stop        StopReason
	// PrefillSeconds is the time to the first token's logits; StepSeconds
	// the wall time of each generated token (the first includes prefill).
	PrefillSeconds float64
	StepSeconds    []float64
	State          *State // the state after the call
	PrefixState    *State // with KeepPrefix: the state before the last prompt position
	// CheckpointState is the state after GenOptions.Checkpoint (nil: none)
	CheckpointState *State
	// Reused is how many prompt positions came from the prompt cache
	// (GenOptions.Cache) instead of being read.
	Reused int
	Stats  Stats // what the call read and waited for
	// DecodePasses are the forwards after the prompt that chose tokens:
	// one per token without speculation, fewer with accepted drafts.
	DecodePasses int
	// Passes are the decode passes in order: the drafts each verified and
	// how many of them were accepted ({0, 0}: a plain step).
	Passes []Pass
	logits [][]float32 // with keepLogits: the logits that chose each token
}

// PassesPerToken is the forwards per generated token, the prompt's last
// one (which chose the first token) included: 1 without speculation.
func (r *GenResult) PassesPerToken() float64 {
	if len(r.Generated) == 0 {
		return 0
	}
	return float64(r.DecodePasses+1) / float64(len(r.Generated))
}

// AcceptedPerPass is the mean number of drafts accepted per decode pass.
func (r *GenResult) AcceptedPerPass() float64 {
	if r.DecodePasses == 0 {
		return 0
	}
	return float64(r.Stats.SpecAccepted) / float64(r.DecodePasses)
}

// FullIDs are the prior, prompt and generated ids in order.
func (r *GenResult) FullIDs() []int {
	return slices.Concat(r.Prior, r.Prompt, r.Generated)
}

// SpecSim is what the generation's decode passes would read and take at
// costs: the drafts and acceptance are the generation's own.
func (r *GenResult) SpecSim(maxDraft int, costs PassCosts) SpecSim {
	return simOfPasses(len(r.Generated), r.Passes, maxDraft, costs)
}

// SecondsPerToken is the mean wall time per generated token.
func (r *GenResult) SecondsPerToken() float64 {
	if len(r.StepSeconds) == 0 {
		return 0
	}
	sum := 0.0
	for _, s := range r.StepSeconds {
		sum += s
	}
	return sum / float64(len(r.StepSeconds))
}

// Generate feeds prompt into s (nil: a fresh state) and generates up to
// opt.MaxTokens tokens. It is the engine's one decode loop: the CLI, chat
// sessions, the app, the server and k3 bench's measurements of decoding
// (through GenTrace.OnPass) all run it.
//
// Cancelling ctx stops within one layer's work, prefill included: Generate
// returns ctx.Err() with the partial result, and the state holds every
// position that completed (see Feed).
//
// It runs the phases of a generation in order: readPrompt, then with
// MaxTokens decode (a plain step or a verification of drafts per pass, add
// per chosen token) and finish. A step that resumes the prompt from a
// cached state goes before readPrompt, as its own phase.
func (e *Engine) Generate(ctx context.Context, s *State, prompt []int, opt GenOptions) (*GenResult, error) {
	opt.Cache = opt.Cache.forDraft(e.m.draft)
	g := e.newGeneration(ctx, s, prompt, opt)
	start := e.Snapshot()
	if g.trace.LayerTimes {
		defer e.stopLayerTimes()
	}
	defer func() { g.res.Stats = e.Snapshot().Sub(start) }()
	phases := []func() error{g.readPrompt}
	if opt.Cache != nil && !opt.Recompute {
		phases = []func() error{g.resume, g.readPrompt}
		defer opt.Cache.keep(g.s)
	}
	if opt.MaxTokens > 0 {
		phases = append(phases, g.decode, g.finish)
	}
	for _, phase := range phases {
		if err := phase(); err != nil {
			return g.res, g.fail(err)
		}
	}
	return g.res, nil
}

// generation is one call of Generate: its phases are its methods.
type generation struct {
	e      *Engine
	ctx    context.Context
	s      *State
	prompt []int
	opt    GenOptions
	trace  GenTrace // opt.Trace, or no hooks
	res    *GenResult
	spec   *specControl // the draft controller (nil: no drafts)
	full   []int        // the prior, prompt and generated ids so far
	// logits choose the next token; t0 is when the pass that computed
	// them started and dt the wall time the token they choose is charged
	logits []float32
	t0     time.Time
	dt     float64
	// complete: the last generated token is still to be fed (Complete)
	complete bool
}

// newGeneration prepares the generation of prompt after s's ids.
func (e *Engine) newGeneration(ctx context.Context, s *State, prompt []int, opt GenOptions) *generation {
	if s == nil {
		s = e.m.NewState()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	g := &generation{e: e, ctx: ctx, s: s, prompt: prompt, opt: opt, complete: opt.Complete && !opt.Recompute}
	if opt.Trace != nil {
		g.trace = *opt.Trace
	}
	g.res = &GenResult{Prior: slices.Clone(s.IDs), Prompt: prompt, Stop: StopLength, State: s}
	g.full = g.res.FullIDs()
	return g
}

// emit hands ev to OnEvent; prefill progress counts the whole prompt,
// what the prompt cache gave included (Reused).
func (g *generation) emit(ev Event) {
	if g.opt.OnEvent == nil {
		return
	}
	if r := g.res.Reused; r > 0 && ev.Kind == EventPrefill {
		ev.Done, ev.Total, ev.Reused = r+ev.Done, len(g.res.Prompt), r
	}
	g.opt.OnEvent(ev)
}

// resume takes the prompt's start from the prompt cache (GenOptions.Cache):
// the longest snapshot of it that leaves a position to read (none is
// needed without tokens to generate) replaces the state, and readPrompt
// reads the rest, keeping snapshots at the cache's marks on the way.
func (g *generation) resume() error {
	c := g.opt.Cache
	leave := 1 // the last position's logits choose the first token
	if g.opt.MaxTokens <= 0 {
		leave = 0
	}
	g.res.Reused = max(0, c.resume(g.s, g.full, leave))
	g.prompt = g.full[g.s.Pos:] // from a stale state's snapshot: its ids after it too
	g.s.SetMarks(c.marks(g.s.Pos, len(g.full), mediaStart(g.s, len(g.full))))
	c.catch(g.s)
	return nil
}

// readPrompt feeds the prompt into the state, progress per chunk to
// OnEvent, and keeps the logits after its last position: with KeepPrefix
// also a copy of the state after all but the last position, and with
// Checkpoint one after that position, taken inside the same passes
// (readKeeping); with Recompute (and tokens to
// generate) the whole sequence into a fresh state, which carries the
// state's pending image rows (and keeps no prefix copy). This is the
// one place the prompt is read: the plan's prefill chunk (the positions
// per forward) enters here, and image rows given to the state
// (State.AddMedia) are fed at their media positions by these feeds; a
// resume from the prompt cache runs before it, as its own phase, and
// leaves it the positions not resumed.
func (g *generation) readPrompt() error {
	e, n := g.e, len(g.prompt)
	g.t0 = time.Now()
	defer func() { g.res.PrefillSeconds = time.Since(g.t0).Seconds() }()
	var err error
	switch {
	case g.opt.Recompute && g.opt.MaxTokens > 0:
		g.logits, err = e.feed(g.ctx, e.m.freshWithMedia(g.s), g.full, false, g.emit)
	case g.opt.KeepPrefix && n > 0 || g.opt.Checkpoint > 0:
		g.logits, err = g.readKeeping()
	default:
		g.logits, err = e.feed(g.ctx, g.s, g.prompt, false, g.emit)
	}
	return err
}

// readKeeping reads the prompt keeping the copies KeepPrefix and
// Checkpoint ask for, taken inside the passes that read it.
func (g *generation) readKeeping() ([]float32, error) {
	n, pos := len(g.prompt), g.s.Pos
	at := []int{-1, -1} // the prefix, the checkpoint (-1: none)
	if g.opt.KeepPrefix && n > 0 {
		at[0] = pos + n - 1
	}
	if c := g.opt.Checkpoint; c >= pos && c <= pos+n {
		at[1] = c
	}
	logits, kept, err := g.e.feedKeeping(g.ctx, g.s, g.prompt, at, g.emit)
	g.res.PrefixState, g.res.CheckpointState = kept[0], kept[1]
	return logits, err
}

// decode chooses tokens until one ends the generation: each from the
// logits of the pass before, then a pass that feeds it (recompute, step or
// verify).
func (g *generation) decode() error {
	g.res.FirstLogits = g.logits
	if !g.opt.Recompute {
		g.spec = g.e.newSpec(g.s, specSetup{mode: g.opt.Spec, sampler: foresight(g.opt.Sampler), cost: g.trace.SpecCosts, propose: g.trace.Propose})
	}
	g.spec.start(g.full)
	g.dt = time.Since(g.t0).Seconds() // the first token's time includes prefill
	for {
		if g.add(pick(g.opt.Sampler, len(g.full), g.logits), g.dt, g.logits) {
			return nil
		}
		if err := g.ctx.Err(); err != nil {
			return err
		}
		g.t0 = time.Now()
		if g.opt.Recompute {
			if err := g.recompute(); err != nil {
				return err
			}
			continue
		}
		draft := g.spec.draft(g.full, g.opt.MaxTokens-len(g.res.Generated))
		if len(draft) == 0 {
			if err := g.step(); err != nil {
				return err
			}
			continue
		}
		if done, err := g.verify(draft); done || err != nil {
			return err
		}
	}
}

// add appends a generated token chosen by logits and reports it; it says
// whether generation ends with it.
func (g *generation) add(id int, dt float64, logits []float32) bool {
	res, opt := g.res, g.opt
	g.full = append(g.full, id)
	res.Generated = append(res.Generated, id)
	res.StepSeconds = append(res.StepSeconds, dt)
	if opt.keepLogits {
		res.logits = append(res.logits, logits)
	}
	g.spec.observeToken(g.full)
	ev := Event{Kind: EventToken, Step: len(res.Generated) - 1, Token: id, Seconds: dt, Stats: g.e.counters(), At: time.Now()}
	g.emit(ev)
	switch {
	case opt.OnToken != nil && opt.OnToken(ev):
		res.Stop = StopCaller
	case slices.Contains(opt.StopIDs, id):
		res.Stop = StopToken
	default:
		return len(res.Generated) >= opt.MaxTokens
	}
	return true
}

// recompute runs the whole sequence in a fresh state for the next logits
// (Recompute: a check of the incremental path).
func (g *generation) recompute() error {
	g.res.DecodePasses++
	var err error
	if g.logits, err = g.e.Feed(g.ctx, g.e.m.freshWithMedia(g.s), g.full, false); err != nil {
		return err
	}
	g.dt = time.Since(g.t0).Seconds()
	return nil
}

// step is a plain decode pass: it feeds the token just chosen.
func (g *generation) step() error {
	meter := g.e.startPass(g.trace.LayerTimes)
	g.res.DecodePasses++
	var err error
	if g.logits, err = g.e.Feed(g.ctx, g.s, g.full[len(g.full)-1:], false); err != nil {
		return err
	}
	g.e.endPass(meter, 1, g.trace.OnPass)
	g.res.Passes = append(g.res.Passes, Pass{})
	g.dt = time.Since(g.t0).Seconds()
	return nil
}

// verify is a decode pass with drafts: it feeds the token just chosen and
// draft in one forward, adds the drafts the sampler would have chosen and
// rolls the state back to them. It says whether generation ended inside
// the draft.
func (g *generation) verify(draft []int) (bool, error) {
	e, res, V := g.e, g.res, g.e.m.Cfg.VocabSize
	meter := e.startPass(g.trace.LayerTimes)
	res.DecodePasses++
	if g.opt.onDraft != nil {
		g.opt.onDraft(draft)
	}
	rows, err := e.verify(g.ctx, g.s, append([]int{g.full[len(g.full)-1]}, draft...))
	if err != nil {
		return false, err
	}
	e.endPass(meter, len(draft)+1, g.trace.OnPass)
	// row i chooses the token at position base+i; the drafts stand up to
	// the first one plain decoding would not have chosen
	base, acc := len(g.full), 0
	for acc < len(draft) && pick(g.opt.Sampler, base+acc, rows[acc*V:(acc+1)*V]) == draft[acc] {
		acc++
	}
	e.drafted.Add(int64(len(draft)))
	e.accepted.Add(int64(acc))
	res.Passes = append(res.Passes, Pass{len(draft), acc})
	g.dt = time.Since(g.t0).Seconds() / float64(acc+1)
	for i := 0; i < acc; i++ {
		if g.add(draft[i], g.dt, rows[i*V:(i+1)*V]) {
			res.Passes[len(res.Passes)-1].Accepted = i + 1
			// the state holds what plain decoding would: the tokens
			// before this one, and with Complete this one too
			keep := i + 1
			if g.complete {
				keep, g.complete = i+2, false
			}
			e.rewind(g.s, keep)
			return true, nil
		}
	}
	e.rewind(g.s, acc+1)
	g.logits = rows[acc*V : (acc+1)*V]
	return false, nil
}

// finish feeds the last generated token with Complete, so the state holds
// the whole sequence.
func (g *generation) finish() error {
	if !g.complete {
		return nil
	}
	g.complete = false
	_, err := g.e.Feed(g.ctx, g.s, g.res.Generated[len(g.res.Generated)-1:], false)
	return err
}

// fail ends the generation with err. On a cancel the result stops as
// cancelled, and Complete still applies: a token chosen but not yet fed is
// fed (one step, not cancellable), so the state holds every generated id.
func (g *generation) fail(err error) error {
	if g.ctx.Err() == nil || err != g.ctx.Err() {
		return err
	}
	res := g.res
	res.Stop = StopCancelled
	n := len(res.Generated)
	if g.opt.Complete && !g.opt.Recompute && n > 0 && g.s.Pos == len(res.Prior)+len(res.Prompt)+n-1 {
		if _, ferr := g.e.Feed(context.Background(), g.s, res.Generated[n-1:], false); ferr != nil {
			return ferr
		}
	}
	return err
}

// TeacherForce runs one forward over ids and returns the argmax after every position.
func (e *Engine) TeacherForce(ctx context.Context, ids []int) ([]int, error) {
	logits, err := e.Feed(ctx, e.m.NewState(), ids, true)
	if err != nil {
		return nil, err
	}
	V := e.m.Cfg.VocabSize
	pred := make([]int, len(ids))
	for t := range ids {
		pred[t] = kernels.Argmax(logits[t*V : (t+1)*V])
	}
	return pred, nil
}
