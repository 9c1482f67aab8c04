package doctor

import (
	"math"

	"k3/engine/plan"
)

// The prefill cost model: what reading a prompt of N positions costs at a
// preset before the first token.
//
// The engine reads a prompt in passes of the plan's chunk C (the longest
// the memory holds: plan.FitChunk), so N positions take ceil(N/C) passes.
// Every pass reads what the plan does not hold of the weights:
//
//	trunk   = the streamed trunk (trunk - pinned), every pass
//	experts = per MoE layer, the union of the routed experts its c
//	          positions pick: E x (1 - (1 - k/E)^c) of E = 896 experts
//	          (k = 16 picks; 68% of them at c = 64, all but 0.0001% from
//	          c = 800), less the share the expert cache holds
//
// and computes every position once: the weights a token touches at the
// kernels' rates (as a decoded token, a bound: a batched pass computes
// faster per position) plus MLA attention over the context so far, 24
// layers of 96 heads x (576 + 512) multiply-adds per cached position,
// read from f32 rows at the bf16 rate per byte pair.
//
// seconds = trunk / trunk disk + experts / expert disk + compute (no
// overlap: a bound, like the decode model).

// PrefillPrediction is the prefill cost model's answer for one preset and
// prompt length.
type PrefillPrediction struct {
	Preset    string  `json:"preset"`
	Positions int     `json:"positions"`
	Chunk     int     `json:"chunk"`  // positions per pass (0: the preset does not fit)
	Passes    int     `json:"passes"` // ceil(positions / chunk)
	Bytes     int64   `json:"bytes"`  // read from disk over all passes
	IOSeconds float64 `json:"io_seconds"`
	Compute   float64 `json:"compute_seconds"`
	Seconds   float64 `json:"seconds"` // time to first token: I/O + compute
	PlanBytes int64   `json:"plan_bytes"`
}

// PrefillPlan is the released model's plan at budget b for a context of
// positions with the longest prefill chunk usable bytes hold (95% of them,
// Plan.Check's test), or with chunk when it is positive.
func (m Model) PrefillPlan(b plan.Budget, positions int, usable int64, chunk int) (*plan.Plan, error) {
	in := m.inputs(m.run(b, positions))
	if chunk > 0 {
		in.Chunk, in.ChunkWhy = chunk, plan.ChunkForced
		return plan.Make(in), nil
	}
	n, err := plan.FitChunk(in, int64(0.95*float64(usable)), positions)
	if err != nil {
		return nil, err
	}
	in.Chunk, in.ChunkWhy = n, plan.ChunkMemory
	return plan.Make(in), nil
}

// ExpertUnion is the share of a MoE layer's experts that c positions pick
// between them (uniform picks of k of E each).
func (m Model) ExpertUnion(c int) float64 {
	E, k := float64(m.Cfg.Experts), float64(m.Cfg.TopK)
	if E <= 0 {
		return 0
	}
	return 1 - math.Pow(1-k/E, float64(c))
}

// PassBytes is what one pass of c positions reads at plan p: the streamed
// trunk and the union of the routed experts it picks that the cache does
// not hold.
func (m Model) PassBytes(p *plan.Plan, c int) (trunk, experts int64) {
	held := min(float64(p.CacheBytes)/float64(max(m.ExpertPoolBytes, 1)), 1)
	pool := float64(m.ExpertBytes) * float64(m.Cfg.Experts) * float64(m.MoELayers)
	return m.TrunkBytes - p.PinnedBytes, int64(pool * m.ExpertUnion(c) * (1 - held))
}

// AttentionMACs are the MLA multiply-adds of reading positions 0..n-1
// (each position attends to itself and those before it).
func (m Model) AttentionMACs(n int) float64 {
	c := m.Cfg
	mla := 0
	for i := 0; i < c.Layers; i++ {
		if c.IsMLA(i) {
			mla++
		}
	}
	perKey := float64(c.Heads * (2*c.KVLoraRank + c.QKRope))
	return float64(mla) * perKey * float64(n) * float64(n+1) / 2
}

// PredictPrefill is the time to first token of a prompt of n positions at
// preset pr on a machine with usable bytes of memory (chunk > 0 forces
// the chunk), with computePerPos seconds of compute per position besides
// attention (<= 0: the decode model's compute at s).
func PredictPrefill(pr plan.Preset, s Speeds, n int, usable int64, chunk int, computePerPos float64) PrefillPrediction {
	out := PrefillPrediction{Preset: pr.Name, Positions: n}
	positions := max(n+1, PlanPositions)
	p, err := K3.PrefillPlan(pr.Budget(), positions, usable, chunk)
	if err != nil || n <= 0 {
		return out
	}
	out.Chunk, out.PlanBytes = p.Chunk, p.Total
	out.Passes = (n + p.Chunk - 1) / p.Chunk
	var trunk, experts int64
	for done := 0; done < n; done += p.Chunk {
		t, e := K3.PassBytes(p, min(p.Chunk, n-done))
		trunk, experts = trunk+t, experts+e
	}
	out.Bytes = trunk + experts
	out.IOSeconds = float64(trunk)/(s.TrunkDiskGBps*1e9) + float64(experts)/(s.ExpertDiskGBps*1e9)
	if computePerPos <= 0 {
		computePerPos = float64(K3.TrunkBytes)/(s.BF16GBps*1e9) + float64(K3.ExpertBytesPerToken())/(s.MXFP4GBps*1e9)
	}
	// attention: f32 rows, 4 bytes a multiply-add, at the bf16 byte rate
	attn := K3.AttentionMACs(n) * 4 / (s.BF16GBps * 1e9)
	out.Compute = float64(n)*computePerPos + attn + float64(K3.LMHeadBytes)/(s.BF16GBps*1e9)
	out.Seconds = out.IOSeconds + out.Compute
	return out
}
