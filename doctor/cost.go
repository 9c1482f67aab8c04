package doctor

import (
	"math"

	"k3/engine/plan"
)

// The cost model: what one decoded token costs at a memory preset.
//
// The bytes come from the released checkpoint's config (K3, model.go) and
// the memory plan from plan.Make over them — the engine's own plan, so the
// doctor and the engine agree on the bytes of a preset:
//
//   - trunk: everything but the routed experts, 108.81 GB in 93 layers.
//     Every token runs every layer, so the part of the trunk the plan does
//     not pin is read from disk every token.
//   - experts per token: 16 routed experts of 17.55 MB in each of the 92
//     MoE layers = 25.83 GB, minus what the expert cache hits.
//   - lm_head: 163840 x 7168 bf16, 2.35 GB; ultra streams it (and the
//     embeddings), so it is then read every token.
//
// Per token, at a preset's plan (pinned trunk bytes, expert cache bytes C):
//
//	disk bytes = (trunk - pinned)                        streamed trunk, sequential
//	           + (1 - hit(C)) * experts per token        expert misses, random 17.55 MB reads
//	           + (ultra ? lm_head : 0)
//	io s       = trunk part / trunk disk seq GB/s + expert part / expert disk best(qd1, qd8) GB/s
//	compute s  = (trunk + lm_head) / bf16 GB/s + experts per token / mxfp4 GB/s
//	s/token    = io s + compute s
//
// The sum is deliberately conservative: an engine that overlaps reads and
// compute perfectly approaches max(io, compute). Kernel speeds are measured
// with the engine's own mat-vec kernels (package kernels, the SIMD path
// this CPU gets) on every physical core (see kernel.go) or, when not
// measured, DefaultBF16GBps / DefaultMXFP4GBps per core (the portable
// path's rates: a floor).
//
// hit(C) is the LRU hit rate the C engine measured in steady-state
// incremental decode (published-data/memory-ladder.tsv, expert_hit_true):
// 0% while the cache is smaller than about one token's expert set (LRU
// thrashes), ~30-44% from 36 to 109 GB, linearly extended to the 90%
// compulsory-miss ceiling of the recorded trace at the whole pool. The
// re-prefill trace (expert-cache-capacity.txt, LRU column: 36% from 8 to
// 64 GB, 49% at 128 GB, 90% from 192 GB) is reported as the optimistic
// bound: that file says itself that steady-state decode hits less.
//
// Peak RSS is the plan's total (Model.Plan: the KV cache for PlanPositions,
// the KDA state, buffers, the process base).
const (
	// DefaultBF16GBps and DefaultMXFP4GBps are per-core weight-byte rates
	// of the portable exact kernels (the development machines' measured limits, a document not in
	// this repository: pure Go scalar
	// exact f64, ~5 GB/s; exact MXFP4 about 0.4 of bf16), used when no
	// measurement is available.
	DefaultBF16GBps  = 5.0
	DefaultMXFP4GBps = 2.0
)

// hitPoint is one point of a hit-rate curve: cache GB -> hit fraction.
type hitPoint struct{ gb, hit float64 }

// steadyHits: published-data/memory-ladder.tsv (cache_gb, expert_hit_true),
// with the 90% ceiling at the whole pool.
var steadyHits = []hitPoint{
	{0, 0}, {23.59, 0}, {36.39, 0.2989}, {49.19, 0.322}, {61.99, 0.3308},
	{77.0, 0.3553}, {108.98, 0.4375}, {float64(K3.ExpertPoolBytes) / 1e9, 0.90},
}

// traceHits: published-data/expert-cache-capacity.txt, LRU column.
var traceHits = []hitPoint{
	{0, 0}, {8, 0.3624}, {64, 0.3624}, {128, 0.4919}, {192, 0.90}, {float64(K3.ExpertPoolBytes) / 1e9, 0.90},
}

func interp(pts []hitPoint, gb float64) float64 {
	if gb <= pts[0].gb {
		return pts[0].hit
	}
	for i := 1; i < len(pts); i++ {
		if gb <= pts[i].gb {
			a, b := pts[i-1], pts[i]
			return a.hit + (b.hit-a.hit)*(gb-a.gb)/(b.gb-a.gb)
		}
	}
	return pts[len(pts)-1].hit
}

// HitRate returns the expected steady-state expert-cache hit rate at a
// cache of cacheGB, and the optimistic bound from the recorded trace.
func HitRate(cacheGB float64) (expected, optimistic float64) {
	return interp(steadyHits, cacheGB), interp(traceHits, cacheGB)
}

// Speeds are the measured (or assumed) rates the model needs, in GB/s.
type Speeds struct {
	TrunkDiskGBps  float64 // sequential read speed of the disk holding the packed trunk
	ExpertDiskGBps float64 // random 17.5 MB read speed of the disk holding the shards
	BF16GBps       float64 // bf16 mat-vec weight bytes per second, all cores
	MXFP4GBps      float64 // MXFP4 mat-vec weight bytes per second, all cores
	FMAGFlops      float64 // float64 FMA peak, GFLOP/s, all cores (the vision tower's limit; 0: DefaultFMAGFlops)
}

// Prediction is the cost model's answer for one preset.
type Prediction struct {
	Name                      string  `json:"name"`
	TrunkGB                   float64 `json:"trunk_gb"`
	CacheGB                   float64 `json:"cache_gb"`
	PredictedSecondsPerToken  float64 `json:"predicted_seconds_per_token"`
	OptimisticSecondsPerToken float64 `json:"optimistic_seconds_per_token"`
	PredictedPeakRSSBytes     int64   `json:"predicted_peak_rss_bytes"`
	// AppPeakRSSBytes is the same plan in the app: its process base (the
	// window toolkit) instead of the CLI's (AppBytes).
	AppPeakRSSBytes            int64   `json:"app_peak_rss_bytes"`
	DiskBytesPerToken          int64   `json:"disk_bytes_per_token"`
	IOSeconds                  float64 `json:"io_seconds"`
	ComputeSeconds             float64 `json:"compute_seconds"`
	ExpertHitRate              float64 `json:"expert_hit_rate"`
	PinnedTrunkBytes           int64   `json:"pinned_trunk_bytes"`
	StreamedTrunkBytesPerToken int64   `json:"streamed_trunk_bytes_per_token"`
	// FirstToken100 is the time to the first token of a 100-position
	// prompt (a question and the thinking preamble) on this machine's
	// memory, read in passes of PrefillChunk positions (PredictPrefill;
	// 0: not predicted, or the preset does not fit).
	FirstToken100 float64 `json:"first_token_seconds_100,omitempty"`
	PrefillChunk  int     `json:"prefill_chunk,omitempty"`
}

// PeakRSS returns the predicted peak resident memory of a preset: its
// memory plan's total, for k3 run and k3 chat (the app's: AppBytes).
func PeakRSS(p plan.Preset) int64 { return Need(p.Budget()) }

// Predict applies the cost model to a preset.
func Predict(p plan.Preset, s Speeds) Prediction {
	pl := K3.Plan(p.Budget())
	pinned := float64(pl.PinnedBytes)
	streamed := float64(K3.TrunkBytes) - pinned
	hit, opt := HitRate(float64(pl.CacheBytes) / plan.GB)
	ultraBytes := 0.0
	if p.Ultra {
		ultraBytes = float64(K3.LMHeadBytes)
	}
	perToken := float64(K3.ExpertBytesPerToken())
	ioFor := func(h float64) float64 {
		t := (streamed + ultraBytes) / (s.TrunkDiskGBps * 1e9)
		e := (1 - h) * perToken / (s.ExpertDiskGBps * 1e9)
		return t + e
	}
	compute := float64(K3.TrunkBytes+K3.LMHeadBytes)/(s.BF16GBps*1e9) + perToken/(s.MXFP4GBps*1e9)
	io := ioFor(hit)
	return Prediction{
		Name: p.Name, TrunkGB: p.TrunkGB, CacheGB: p.CacheGB,
		PredictedSecondsPerToken:   round2(io + compute),
		OptimisticSecondsPerToken:  round2(ioFor(opt) + compute),
		PredictedPeakRSSBytes:      pl.Total,
		AppPeakRSSBytes:            AppBytes(pl.Total),
		DiskBytesPerToken:          int64(streamed + ultraBytes + (1-hit)*perToken),
		IOSeconds:                  round2(io),
		ComputeSeconds:             round2(compute),
		ExpertHitRate:              round4(hit),
		PinnedTrunkBytes:           int64(pinned),
		StreamedTrunkBytesPerToken: int64(streamed),
	}
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Choose returns the preset "auto" resolves to on mem (plan.Resolve over
// the released model's plan, Need) with its prediction; ok is false when
// not even ultra fits (or the memory is unknown), and the prediction is
// then ultra's.
func Choose(mem plan.Memory, s Speeds) (Prediction, bool) {
	b, err := plan.Resolve("auto", &mem, Need)
	if err != nil {
		return Predict(plan.Presets[0], s), false
	}
	p, _ := plan.Lookup(b.Preset)
	return Predict(p, s), true
}
