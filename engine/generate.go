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
	// Complete also feeds the last generated token, so the state holds the
	// whole sequence (for saving it), after a cancel too.
	Complete bool
	// Spec is speculative decoding: SpecAuto (the zero value) drafts when
	// the measured costs say it pays, SpecOff never, a positive value
	// forces drafts of up to that many tokens (at most the model's
	// Options.MaxDraft and a prefill chunk less one). The tokens, logits
	// and state are the same whatever it is.
	Spec Spec
	// SpecCosts, when set, is the modelled seconds of a decode pass of T
	// positions the draft controller chooses lengths by, instead of the
	// costs this engine measures (k3 bench spec decodes a small model as
	// the full one would be decoded on another machine).
	SpecCosts func(T int) float64
	// OnPass, when set, receives the measurement of every decode pass after
	// the prompt (a plain step or a verification pass; none with
	// Recompute), the one the draft controller learns its costs from. k3
	// bench measures decoding through it.
	OnPass func(PassStats)
	// LayerTimes makes every PassStats carry the pass's time per layer
	// (a clock read per layer and per routed expert).
	LayerTimes bool
	// Propose, when set, proposes the drafts instead of the model's drafter
	// (its draft model or the context drafter): up to k tokens to follow ids
	// (every token so far, the one just chosen last). The tokens stay those
	// the sampler chooses whatever it proposes. k3 bench times verification
	// passes of chosen lengths through it; the tests check verification.
	Propose func(ids []int, k int) []int
	// keepLogits makes the result carry the logits that chose every token
	// (tests).
	keepLogits bool
	// onDraft sees every draft a pass verifies (tests)
	onDraft func(draft []int)
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
	Stats          Stats  // what the call read and waited for
	// DecodePasses are the forwards after the prompt that chose tokens:
	// one per token without speculation, fewer with accepted drafts.
	DecodePasses int
	// Passes are the decode passes in order: the drafts each verified and
	// how many of them were accepted ({0, 0}: a plain step).
	Passes []Pass
	logits [][]float32 // with keepLogits: the logits that chose each token
}

// Pass is one decode pass of Generate: it fed the chosen token and Drafted
// draft tokens, of which Accepted became tokens (fewer than were accepted
// when generation ended inside the draft).
type Pass struct{ Drafted, Accepted int }

// PassStats is one decode pass of Generate as measured (GenOptions.OnPass).
// The clock starts before the counters are read and stops after they are
// read again, so the read time of Stats lies inside Seconds.
type PassStats struct {
	Positions int     // positions the pass fed: the chosen token and its draft
	Seconds   float64 // wall time of the forward (drafting and choosing excluded)
	Stats     Stats   // what the pass read and waited for
	// With GenOptions.LayerTimes, per bound layer: LayerSeconds is the
	// layer's wall time, waiting for its weights included; ExpertSeconds the
	// time it computed its routed experts (their reads excluded).
	LayerSeconds, ExpertSeconds []float64
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
// (through OnPass) all run it.
//
// Cancelling ctx stops within one layer's work, prefill included: Generate
// returns ctx.Err() with the partial result, and the state holds every
// position that completed (see Feed).
func (e *Engine) Generate(ctx context.Context, s *State, prompt []int, opt GenOptions) (*GenResult, error) {
	if s == nil {
		s = e.m.NewState()
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := e.Snapshot()
	if opt.LayerTimes {
		defer e.stopLayerTimes()
	}
	res := &GenResult{Prior: slices.Clone(s.IDs), Prompt: prompt, Stop: StopLength, State: s}
	defer func() { res.Stats = e.Snapshot().Sub(start) }()
	fail := func(err error) (*GenResult, error) {
		if ctx.Err() != nil && err == ctx.Err() {
			res.Stop = StopCancelled
			// Complete applies on a cancel too: a token chosen but not yet
			// fed is fed (one step, not cancellable), so the state holds
			// every generated id
			n := len(res.Generated)
			if opt.Complete && !opt.Recompute && n > 0 && s.Pos == len(res.Prior)+len(prompt)+n-1 {
				if _, ferr := e.Feed(context.Background(), s, res.Generated[n-1:], false); ferr != nil {
					return res, ferr
				}
			}
		}
		return res, err
	}
	emit := func(ev Event) {
		if opt.OnEvent != nil {
			opt.OnEvent(ev)
		}
	}
	t0 := time.Now()
	full := res.FullIDs()
	var logits []float32
	var err error
	switch {
	case opt.Recompute && opt.MaxTokens > 0:
		logits, err = e.feed(ctx, e.m.freshWithMedia(s), full, false, emit)
	case opt.KeepPrefix && len(prompt) > 0:
		// progress counts the whole prompt across the two feeds
		n := len(prompt)
		part := func(base int) func(Event) {
			return func(ev Event) { ev.Done, ev.Total = base+ev.Done, n; emit(ev) }
		}
		if _, err = e.feed(ctx, s, prompt[:n-1], false, part(0)); err == nil {
			res.PrefixState = s.Clone()
			logits, err = e.feed(ctx, s, prompt[n-1:], false, part(n-1))
		}
	default:
		logits, err = e.feed(ctx, s, prompt, false, emit)
	}
	res.PrefillSeconds = time.Since(t0).Seconds()
	if err != nil {
		return fail(err)
	}
	if opt.MaxTokens <= 0 {
		return res, nil
	}
	res.FirstLogits = logits
	spec := e.newSpec(s, opt)
	spec.start(full)
	V := e.m.Cfg.VocabSize
	// add appends a generated token chosen by logits and reports it; it
	// says whether generation ends with it
	add := func(id int, dt float64, logits []float32) bool {
		full = append(full, id)
		res.Generated = append(res.Generated, id)
		res.StepSeconds = append(res.StepSeconds, dt)
		if opt.keepLogits {
			res.logits = append(res.logits, logits)
		}
		spec.observeToken(full)
		ev := Event{Kind: EventToken, Step: len(res.Generated) - 1, Token: id, Seconds: dt, Stats: e.counters(), At: time.Now()}
		emit(ev)
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
	dt := time.Since(t0).Seconds() // the first token's time includes prefill
	complete := opt.Complete && !opt.Recompute
	for {
		id := pick(opt.Sampler, len(full), logits)
		if add(id, dt, logits) {
			break
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		t0 = time.Now()
		if opt.Recompute {
			res.DecodePasses++
			if logits, err = e.Feed(ctx, e.m.freshWithMedia(s), full, false); err != nil {
				return fail(err)
			}
			dt = time.Since(t0).Seconds()
			continue
		}
		draft := spec.draft(full, opt.MaxTokens-len(res.Generated))
		meter := e.startPass(opt.LayerTimes)
		res.DecodePasses++
		if len(draft) == 0 {
			if logits, err = e.Feed(ctx, s, []int{id}, false); err != nil {
				return fail(err)
			}
			e.endPass(meter, 1, opt.OnPass)
			res.Passes = append(res.Passes, Pass{})
			dt = time.Since(t0).Seconds()
			continue
		}
		if opt.onDraft != nil {
			opt.onDraft(draft)
		}
		rows, err := e.verify(ctx, s, append([]int{id}, draft...))
		if err != nil {
			return fail(err)
		}
		e.endPass(meter, len(draft)+1, opt.OnPass)
		// row i chooses the token at position base+i; the drafts stand up
		// to the first one plain decoding would not have chosen
		base, acc := len(full), 0
		for acc < len(draft) && pick(opt.Sampler, base+acc, rows[acc*V:(acc+1)*V]) == draft[acc] {
			acc++
		}
		e.drafted.Add(int64(len(draft)))
		e.accepted.Add(int64(acc))
		res.Passes = append(res.Passes, Pass{len(draft), acc})
		dt = time.Since(t0).Seconds() / float64(acc+1)
		for i := 0; i < acc; i++ {
			if add(draft[i], dt, rows[i*V:(i+1)*V]) {
				res.Passes[len(res.Passes)-1].Accepted = i + 1
				// the state holds what plain decoding would: the tokens
				// before this one, and with Complete this one too
				keep := i + 1
				if complete {
					keep, complete = i+2, false
				}
				e.rewind(s, keep)
				return res, nil
			}
		}
		e.rewind(s, acc+1)
		logits = rows[acc*V : (acc+1)*V]
	}
	if complete {
		if _, err := e.Feed(ctx, s, res.Generated[len(res.Generated)-1:], false); err != nil {
			return fail(err)
		}
	}
	return res, nil
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
