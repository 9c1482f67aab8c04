package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k3/kernels"
)

// Engine runs forward passes of a model: one kernel pool and, for a model
// with streamed layers, the ring that reads them ahead. Make one with
// Model.NewEngine; an engine runs one forward at a time.
type Engine struct {
	m      *Model
	pool   *kernels.Pool
	layers layerProvider
	// layerSeconds and expertSeconds, when not nil (one per bound layer),
	// accumulate the pass's time per layer and of its routed experts
	// (GenTrace.LayerTimes).
	layerSeconds, expertSeconds []float64
	// The counters below are written by the generating goroutine and read
	// by Snapshot from any other (the app's gauges poll it during a turn).
	positions atomic.Int64 // positions run through every layer
	passes    atomic.Int64 // forwards through every layer
	// draft tokens verified and accepted (speculative decoding)
	drafted, accepted atomic.Int64
	// spec measures what a pass costs, for choosing draft lengths
	spec specCosts
}

// Model returns the model the engine runs.
func (e *Engine) Model() *Model { return e.m }

// Close stops the engine's workers and any streaming reader.
func (e *Engine) Close() {
	e.pool.Close()
	e.layers.close()
}

// Feed runs ids through the model, advancing s. It returns the logits of the
// last position, or of every position when all is true ([len(ids)][vocab]).
// Long inputs go through in chunks (Model.Chunk positions at a time: the
// plan's prefill chunk).
//
// ctx is checked before every layer. When it is cancelled, Feed returns
// ctx.Err() and s holds exactly the positions of the chunks that completed:
// the chunk in flight is rolled back (its KDA state restored from the copy
// taken before it, its MLA rows dropped), so s stays usable and equals the
// state of feeding those positions alone.
func (e *Engine) Feed(ctx context.Context, s *State, ids []int, all bool) ([]float32, error) {
	return e.feed(ctx, s, ids, all, nil)
}

// feed is Feed with prefill progress reported to on (nil: none).
func (e *Engine) feed(ctx context.Context, s *State, ids []int, all bool, on func(Event)) ([]float32, error) {
	if s.damaged {
		return nil, errDamaged
	}
	if s.stale {
		if err := e.rebuild(ctx, s); err != nil {
			return nil, err
		}
	}
	V := e.m.Cfg.VocabSize
	for _, id := range ids {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("token id %d is outside 0..%d", id, V-1)
		}
	}
	chunk := e.m.chunk
	var out []float32
	for i := 0; i < len(ids); i += chunk {
		j := min(i+chunk, len(ids))
		last := j == len(ids)
		lg, err := e.forward(ctx, s, ids[i:j], all, last)
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, lg...)
		} else if last {
			out = lg
		}
		if on != nil {
			on(Event{Kind: EventPrefill, Done: j, Total: len(ids), Chunk: chunk, Stats: e.Snapshot(), At: time.Now()})
		}
	}
	return out, nil
}

// forward runs one chunk of T positions through every bound layer. It
// returns logits for every position (all) or for the last one (want), else nil.
func (e *Engine) forward(ctx context.Context, s *State, ids []int, all, want bool) ([]float32, error) {
	m := e.m
	c := m.Cfg
	H := c.Hidden
	T := len(ids)
	cancellable := ctx.Done() != nil
	P, err := e.embedIDs(s, ids) // running sum of sub-layer outputs since the last block boundary
	if err != nil {
		return nil, err
	}
	var blocks [][]float32
	d := m.draft
	var taps [][]float32 // with a draft model: the hidden states at its tap layers
	if d != nil {
		taps = make([][]float32, len(d.Cfg.TargetLayers))
	}
	hIn := make([]float32, T*H)
	x := make([]float32, T*H)
	// at the memory floor no copy of the state is kept: a short pass is
	// recorded and replayed, a longer one stopped part-way is dropped
	// (State.stale) and read again at the next feed
	plain := !s.recording && m.lean && cancellable && T <= m.recordCap()
	if plain {
		s.recording, s.recBase, s.recN = true, s.Pos, T
		defer func() { s.recording = false }()
	}
	m.startCapture(s, T)
	for li := 0; li < m.Bound; li++ {
		if err := ctx.Err(); err != nil && s.stop(li, m.lean) {
			return nil, err
		}
		tl := time.Now()
		L, err := e.layers.acquire(li)
		if err != nil {
			s.rollback(li)
			return nil, err
		}
		live := s.beginLayer(li, cancellable && !m.lean)
		P, blocks, err = L.step(e, s, P, blocks, hIn, x, T)
		s.endLayer(li, live)
		e.layers.release(li)
		if err == nil && !allFinite(P) {
			err = layerNonFinite(li, s.Pos, P, H)
		}
		if err != nil {
			s.rollback(li + 1)
			return nil, err
		}
		if e.layerSeconds != nil {
			e.layerSeconds[li] += time.Since(tl).Seconds()
		}
		if d != nil {
			d.tap(taps, li, P)
		}
	}
	e.commitPass(s, ids, taps, plain)
	if !all && !want {
		return nil, nil
	}
	t0 := 0
	if !all {
		t0 = T - 1
	}
	return e.finalLogits(s, P, blocks, t0, T)
}

// commitPass advances s by the pass over ids that the layers have run:
// the KDA state replayed from the scratch when the pass was recorded
// (plain), the fed images dropped, the draft model's state extended from
// its taps, and the engine's counters.
func (e *Engine) commitPass(s *State, ids []int, taps [][]float32, plain bool) {
	T := len(ids)
	if plain {
		e.replayKDA(s, T) // the pass ran on the scratch: now the state takes its positions
	}
	s.Pos += T
	if len(s.media) > 0 {
		s.dropFedMedia(e.m.lean)
	}
	s.IDs = append(s.IDs, ids...)
	if d := e.m.draft; d != nil {
		d.extend(e, s, taps, T)
	}
	s.finishCapture(ids)
	e.positions.Add(int64(T))
	e.passes.Add(1)
}

// embedIDs is the pass's input rows: each id's embedding, or an image's
// projected row where the state holds one (State.AddMedia).
func (e *Engine) embedIDs(s *State, ids []int) ([]float32, error) {
	m := e.m
	H := m.Cfg.Hidden
	P := make([]float32, len(ids)*H)
	for t, id := range ids {
		if row := s.mediaRow(s.Pos+t, H); row != nil {
			copy(P[t*H:(t+1)*H], row)
		} else if err := m.tables.embed(P[t*H:(t+1)*H], id); err != nil {
			return nil, err
		}
	}
	if !allFinite(P) {
		t := firstNonFinite(P) / H
		return nil, &NonFiniteError{Layer: -1, Where: fmt.Sprintf("the embedding of token id %d", ids[t]), Pos: s.Pos + t}
	}
	return P, nil
}

// finalLogits is the logits of positions t0..T-1 of a pass that has
// advanced s by T: the output's attention residual over the blocks and P,
// the final norm, then the head.
func (e *Engine) finalLogits(s *State, P []float32, blocks [][]float32, t0, T int) ([]float32, error) {
	m := e.m
	c := m.Cfg
	H := c.Hidden
	n := T - t0
	h := make([]float32, n*H)
	srcs := make([][]float32, 0, len(blocks)+1)
	for t := t0; t < T; t++ {
		srcs = srcs[:0]
		for _, b := range blocks {
			srcs = append(srcs, b[t*H:(t+1)*H])
		}
		srcs = append(srcs, P[t*H:(t+1)*H])
		row := h[(t-t0)*H : (t-t0+1)*H]
		kernels.AttnRes(row, srcs, m.outFold, c.RMSEps)
		kernels.RMSNorm(row, row, m.finalNorm, c.RMSEps)
	}
	logits := make([]float32, n*c.VocabSize)
	if err := m.tables.head(e.pool, logits, h, n); err != nil {
		return nil, err
	}
	if !allFinite(logits) {
		return nil, &NonFiniteError{Layer: -1, Where: "the output head (final norms and lm_head)", Pos: s.Pos - T + t0 + firstNonFinite(logits)/c.VocabSize}
	}
	return logits, nil
}

// rebuild reads a stale state's ids again into a fresh state (a cancel at
// the memory floor dropped its chunk in flight: State.drop), the rows of
// its pictures at their positions, which then takes its place with the
// images, prompt-cache marks and kept positions still to come. Cancelled
// part-way, it leaves s stale (its ids, pictures and marks as they were).
// The fresh state reads into s's own layer arrays, emptied (State.emptied):
// a stale state's arrays are never read again, and at the floor the plan
// holds the state once, not a second whole state beside them.
func (e *Engine) rebuild(ctx context.Context, s *State) error {
	n := s.emptied()
	n.media = s.allMedia()
	if len(s.IDs) > 0 {
		if _, err := e.feed(ctx, n, s.IDs, false, nil); err != nil {
			return err
		}
	}
	n.marks, n.onCaught, n.keepAt, n.kept = s.marks, s.onCaught, s.keepAt, s.kept
	*s = *n
	return nil
}

// errDamaged refuses a state a failed forward left half-updated.
var errDamaged = errors.New("the decoding state was left incomplete by a failed step; start from a fresh state")

func (e *Engine) mm(m *kernels.Mat, x []float32, T int) []float32 {
	out := make([]float32, T*m.Rows)
	kernels.MatMul(e.pool, out, m, x, T)
	return out
}
