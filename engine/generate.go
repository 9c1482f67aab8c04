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
	// maximum).
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
	// whole sequence (for saving it).
	Complete bool
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
// sessions, the app and the server all run it.
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
	res := &GenResult{Prior: slices.Clone(s.IDs), Prompt: prompt, Stop: StopLength, State: s}
	defer func() { res.Stats = e.Snapshot().Sub(start) }()
	fail := func(err error) (*GenResult, error) {
		if ctx.Err() != nil && err == ctx.Err() {
			res.Stop = StopCancelled
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
		logits, err = e.feed(ctx, e.m.NewState(), full, false, emit)
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
	for step := 0; ; step++ {
		id := pick(opt.Sampler, logits)
		if step == 0 {
			res.FirstLogits = logits
		}
		full = append(full, id)
		res.Generated = append(res.Generated, id)
		dt := time.Since(t0).Seconds()
		res.StepSeconds = append(res.StepSeconds, dt)
		ev := Event{Kind: EventToken, Step: step, Token: id, Seconds: dt, Stats: e.Snapshot(), At: time.Now()}
		emit(ev)
		if opt.OnToken != nil && opt.OnToken(ev) {
			res.Stop = StopCaller
			break
		}
		if slices.Contains(opt.StopIDs, id) {
			res.Stop = StopToken
			break
		}
		if len(res.Generated) >= opt.MaxTokens {
			break
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		t0 = time.Now()
		if opt.Recompute {
			logits, err = e.Feed(ctx, e.m.NewState(), full, false)
		} else {
			logits, err = e.Feed(ctx, s, []int{id}, false)
		}
		if err != nil {
			return fail(err)
		}
	}
	if opt.Complete && !opt.Recompute {
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
