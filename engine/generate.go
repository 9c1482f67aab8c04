package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"k3/kernels"
)

// GenOptions controls greedy generation.
type GenOptions struct {
	Gen       int   // tokens to generate
	StopIDs   []int // stop after emitting one of these (it stays in the output)
	Recompute bool  // run the whole sequence every step instead of carrying state
	// Sampler picks each token; nil means greedy (argmax).
	Sampler *Sampler
	// OnStep is called after each generated token with its step number (0-based),
	// the token, and the step's wall-clock seconds.
	OnStep func(step, id int, seconds float64)
}

// Stop reasons.
const (
	StopLength    = "length"
	StopID        = "stop_id"
	StopCancelled = "cancelled"
)

// GenResult is the outcome of Generate.
type GenResult struct {
	Generated   []int
	FirstLogits []float32 // logits that chose the first generated token
	StopReason  string
	StepSeconds []float64
	State       *State // final state (incremental mode)
}

// ErrCancelled is returned (with a partial result) when ctx is cancelled
// between steps.
var ErrCancelled = errors.New("generation cancelled")

// Generate feeds prompt into st (nil: a fresh state) and greedily generates
// up to opt.Gen tokens (argmax: the first index of the maximum). Cancelling
// ctx lets the step in flight finish and returns what was done.
func (e *Engine) Generate(ctx context.Context, st *State, prompt []int, opt GenOptions) (*GenResult, error) {
	if st == nil {
		st = e.M.NewState()
	}
	res := &GenResult{StopReason: StopLength, State: st}
	full := append(slices.Clone(st.IDs), prompt...)
	t0 := time.Now()
	var logits []float32
	var err error
	if opt.Gen <= 0 {
		_, err = e.Feed(st, prompt, false)
		return res, err
	}
	if opt.Recompute {
		logits, err = e.Feed(e.M.NewState(), full, false)
	} else {
		logits, err = e.Feed(st, prompt, false)
	}
	if err != nil {
		return res, err
	}
	for step := 0; ; step++ {
		id := opt.Sampler.Pick(logits)
		if step == 0 {
			res.FirstLogits = logits
		}
		full = append(full, id)
		res.Generated = append(res.Generated, id)
		dt := time.Since(t0).Seconds()
		res.StepSeconds = append(res.StepSeconds, dt)
		if opt.OnStep != nil {
			opt.OnStep(step, id, dt)
		}
		e.emit(Event{Kind: EventToken, Step: step, Token: id, Seconds: dt})
		if slices.Contains(opt.StopIDs, id) {
			res.StopReason = StopID
			break
		}
		if len(res.Generated) >= opt.Gen {
			break
		}
		if ctx != nil && ctx.Err() != nil {
			res.StopReason = StopCancelled
			return res, ErrCancelled
		}
		t0 = time.Now()
		if opt.Recompute {
			logits, err = e.Feed(e.M.NewState(), full, false)
		} else {
			logits, err = e.Feed(st, []int{id}, false)
		}
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// TeacherForce runs one forward over ids and returns the argmax after every position.
func (e *Engine) TeacherForce(ids []int) ([]int, error) {
	logits, err := e.Feed(e.M.NewState(), ids, true)
	if err != nil {
		return nil, err
	}
	V := e.M.Cfg.VocabSize
	pred := make([]int, len(ids))
	for t := range ids {
		pred[t] = kernels.Argmax(logits[t*V : (t+1)*V])
	}
	return pred, nil
}
