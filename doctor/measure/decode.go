package measure

import (
	"context"
	"fmt"
	"math"
	"slices"

	"k3/engine"
)

// Overlap is how well a stretch of decoding overlapped its reads with its
// compute. Read is the time some read was in flight; Compute the time the
// forward was not waiting for a read. An engine that never overlaps takes
// Read + Compute; a perfect one max(Read, Compute).
type Overlap struct {
	Tokens         int     `json:"tokens"`
	WallSeconds    float64 `json:"wall_seconds"`
	ReadSeconds    float64 `json:"read_seconds"`
	ComputeSeconds float64 `json:"compute_seconds"`
	BytesRead      int64   `json:"bytes_read"`
	// Efficiency is max(Read, Compute) / Wall: 1 is perfect overlap, 0.5
	// what strictly alternating equal reads and compute give.
	Efficiency float64 `json:"overlap_efficiency"`
}

// SecondsPerToken is the measured wall time per token.
func (o Overlap) SecondsPerToken() float64 { return o.WallSeconds / float64(max(o.Tokens, 1)) }

// BoundSecondsPerToken is max(read, compute) per token: what perfect
// overlap would give.
func (o Overlap) BoundSecondsPerToken() float64 {
	return max(o.ReadSeconds, o.ComputeSeconds) / float64(max(o.Tokens, 1))
}

// OverlapOf derives the overlap of a stretch from the counters it
// accumulated (Stats.Sub) and its wall time.
func OverlapOf(d engine.Stats, wall float64, tokens int) Overlap {
	o := Overlap{Tokens: tokens, WallSeconds: wall, ReadSeconds: d.ReadBusySeconds,
		ComputeSeconds: max(wall-d.IOWaitSeconds(), 0), BytesRead: d.BytesRead()}
	if wall > 0 {
		o.Efficiency = max(o.ReadSeconds, o.ComputeSeconds) / wall
	}
	return o
}

// MeasureOverlap decodes tokens greedy steps one position at a time after
// prompt with Generate (the prompt's prefill not measured) and returns
// their overlap: what a bench reports per preset as s/token next to
// max(read, compute). The counters and the wall time are those of each
// decode pass (engine.PassStats), whose read time lies inside its wall
// time, summed.
func MeasureOverlap(ctx context.Context, e *engine.Engine, prompt []int, tokens int) (Overlap, error) {
	var sum engine.Stats
	wall, passes := 0.0, 0
	_, err := e.Generate(ctx, nil, prompt, engine.GenOptions{MaxTokens: tokens + 1, Spec: engine.SpecOff,
		Trace: &engine.GenTrace{OnPass: func(p engine.PassStats) {
			d := p.Stats
			sum.ReadBusySeconds += d.ReadBusySeconds
			sum.TrunkWaitSeconds += d.TrunkWaitSeconds
			sum.TrunkBytesRead += d.TrunkBytesRead
			sum.Expert.ReadSeconds += d.Expert.ReadSeconds
			sum.Expert.BytesRead += d.Expert.BytesRead
			wall += p.Seconds
			passes++
		}}})
	if err != nil {
		return Overlap{}, err
	}
	return OverlapOf(sum, wall, passes), nil
}

// PassTiming is what decode passes of T positions compute, measured on a
// checkpoint resident in memory with every expert cached.
type PassTiming struct {
	T int
	// Layers is the seconds of one layer of each kind ("kda+dense",
	// "kda+moe", "mla+moe"), routed experts excluded.
	Layers map[string]float64
	// ExpertRow is one routed expert applied to one position (from the
	// one-position pass, where no two positions share an expert).
	ExpertRow float64
	// Rest is the rest of the pass: embedding, output mixing, lm_head.
	Rest float64
}

// script is a fixed text: the sampler that chooses it and the drafter
// that proposes it, so every draft of a pass comes true.
type script []int

// Pick chooses the text's token at pos.
func (s script) Pick(pos int, _ []float32) int { return s[pos] }

// propose drafts the k tokens of the text that follow ids.
func (s script) propose(ids []int, k int) []int {
	return slices.Clone(s[len(ids):min(len(ids)+k, len(s))])
}

// MeasurePasses times the decode passes of Generate of 1..maxT positions
// (a plain step, then verification passes of T-1 drafts, every logit
// computed) after a prompt of `prompt` positions, each the fastest of
// reps, on the checkpoint at dir held resident with every expert cached.
// A fixed text is generated (its sampler chooses it, its drafts propose
// it), so each pass verifies exactly the drafts asked for.
func MeasurePasses(ctx context.Context, dir string, threads, maxT, prompt, reps int, logf func(string, ...any)) ([]PassTiming, error) {
	maxDraft := maxT - 1
	if maxDraft == 0 {
		maxDraft = -1
	}
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 50}, Chunk: 64, Positions: prompt + maxT, MaxDraft: maxDraft})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	e := m.NewEngine(threads)
	defer e.Close()
	V := m.Cfg.VocabSize
	ids := make(script, prompt+maxT+1)
	for i := range ids {
		ids[i] = (1000 + 37*i) % V
	}
	// the state holds the prompt but its last position, which each pass's
	// Generate feeds to choose the pass's first token
	var s *engine.State
	for i := 0; i < 2; i++ { // the second prefill finds every expert it uses cached
		s = m.NewState()
		if _, err := e.Feed(ctx, s, ids[:prompt-1], false); err != nil {
			return nil, err
		}
	}
	var out []PassTiming
	for T := 1; T <= maxT; T++ {
		best := PassTiming{T: T, Rest: math.Inf(1), ExpertRow: math.Inf(1)}
		spec := engine.SpecOff
		if T > 1 {
			spec = engine.Spec(T - 1)
		}
		for r := 0; r < reps; r++ {
			var pass *engine.PassStats
			_, err := e.Generate(ctx, s.Clone(), ids[prompt-1:prompt], engine.GenOptions{MaxTokens: T + 1, Sampler: ids, Spec: spec,
				Trace: &engine.GenTrace{Propose: ids.propose, LayerTimes: true, OnPass: func(p engine.PassStats) { pass = &p }}})
			if err != nil {
				return nil, err
			}
			if pass == nil || pass.Positions != T {
				return nil, fmt.Errorf("the pass of %d position(s) was not run as one", T)
			}
			layers := map[string]float64{}
			var inLayers, experts float64
			rows := 0
			for i := 0; i < m.Bound; i++ {
				k := m.Cfg.LayerKind(i)
				layers[k] = pass.LayerSeconds[i] - pass.ExpertSeconds[i]
				inLayers += pass.LayerSeconds[i]
				if !m.Cfg.IsDense(i) {
					experts += pass.ExpertSeconds[i]
					rows += T * m.Cfg.TopK
				}
			}
			if best.Layers == nil {
				best.Layers = layers
			}
			for k, v := range layers {
				best.Layers[k] = min(best.Layers[k], v)
			}
			best.Rest = min(best.Rest, pass.Seconds-inLayers)
			if rows > 0 {
				best.ExpertRow = min(best.ExpertRow, experts/float64(rows))
			}
		}
		if math.IsInf(best.ExpertRow, 1) {
			best.ExpertRow = 0
		}
		logf("pass of %d position(s): %v, expert row %.3f ms, rest %.3f s", T, best.Layers, 1e3*best.ExpertRow, best.Rest)
		out = append(out, best)
	}
	return out, nil
}

// ComputeAt projects the compute seconds of a pass of T positions of a
// model with layers[kind] layers of each kind from measured passes: each
// layer kind at its measured T, each position's top-k routed experts in
// every MoE layer as separate rows (no two positions share an expert, as
// is nearly so among 896), and the rest of the pass.
func ComputeAt(timings []PassTiming, layers map[string]int, moeLayers, topK int) []float64 {
	out := []float64{0}
	row := timings[0].ExpertRow
	for _, t := range timings {
		s := t.Rest + float64(t.T*moeLayers*topK)*row
		kinds := make([]string, 0, len(layers))
		for k := range layers {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			s += float64(layers[k]) * t.Layers[k]
		}
		out = append(out, s)
	}
	return out
}
