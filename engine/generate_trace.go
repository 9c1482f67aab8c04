package engine

import "time"

// GenTrace is a set of hooks into one Generate call, for measuring it (k3
// bench) and steering it (tests); every field is optional. As with
// net/http/httptrace.ClientTrace, a new hook is a new field here, not a
// new GenOptions field.
type GenTrace struct {
	// OnPass, when set, receives the measurement of every decode pass after
	// the prompt (a plain step or a verification pass; none with
	// Recompute), the one the draft controller learns its costs from. k3
	// bench measures decoding through it.
	OnPass func(PassStats)
	// LayerTimes makes every PassStats carry the pass's time per layer
	// (a clock read per layer and per routed expert).
	LayerTimes bool
	// SpecCosts, when set, is the modelled seconds of a decode pass of T
	// positions the draft controller chooses lengths by, instead of the
	// costs this engine measures (k3 bench spec decodes a small model as
	// the full one would be decoded on another machine).
	SpecCosts func(T int) float64
	// Propose, when set, proposes the drafts instead of the model's drafter
	// (its draft model or the context drafter): up to k tokens to follow ids
	// (every token so far, the one just chosen last). The tokens stay those
	// the sampler chooses whatever it proposes. k3 bench times verification
	// passes of chosen lengths through it; the tests check verification.
	Propose func(ids []int, k int) []int
}

// PassStats is one decode pass of Generate as measured (GenTrace.OnPass).
// The clock starts before the counters are read and stops after they are
// read again, so the read time of Stats lies inside Seconds.
type PassStats struct {
	Positions int     // positions the pass fed: the chosen token and its draft
	Seconds   float64 // wall time of the forward (drafting and choosing excluded)
	Stats     Stats   // what the pass read and waited for
	// With GenTrace.LayerTimes, per bound layer: LayerSeconds is the
	// layer's wall time, waiting for its weights included; ExpertSeconds the
	// time it computed its routed experts (their reads excluded).
	LayerSeconds, ExpertSeconds []float64
}

// passMeter measures one decode pass for the cost model and OnPass.
type passMeter struct {
	t0    time.Time
	stats Stats
}

// startPass starts a pass's measurement: with layers, the per-layer times
// too. The clock starts before the counters are read.
func (e *Engine) startPass(layers bool) passMeter {
	if layers {
		e.layerSeconds, e.expertSeconds = make([]float64, e.m.Bound), make([]float64, e.m.Bound)
	}
	return passMeter{time.Now(), e.counters()}
}

// endPass ends the measurement of a pass of T positions, folds it into the
// draft controller's cost model and hands it to on (nil: none). The
// counters are read before the clock stops.
func (e *Engine) endPass(p passMeter, T int, on func(PassStats)) {
	d := e.counters().Sub(p.stats)
	wall := time.Since(p.t0).Seconds()
	e.spec.measure(T, wall, d.IOWaitSeconds(), d.ReadBusySeconds, d.TrunkBytesRead, d.Expert.BytesRead)
	if on != nil {
		on(PassStats{Positions: T, Seconds: wall, Stats: d, LayerSeconds: e.layerSeconds, ExpertSeconds: e.expertSeconds})
	}
	e.stopLayerTimes()
}

// stopLayerTimes stops timing layers (a pass that failed leaves them on).
func (e *Engine) stopLayerTimes() { e.layerSeconds, e.expertSeconds = nil, nil }
