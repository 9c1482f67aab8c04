package doctor

import (
	"math"

	"k3/engine/plan"
)

// The cost model: what one decoded token costs at a memory preset.
//
// Facts about the released checkpoint (reference/k3-model.md,
// reference/machine-limits.md, published-data/):
//
//   - TrunkBytes: everything but the routed experts, 108.8 GB in 93 layers
//     (~1.17 GB per layer). Every token runs every layer, so the part of
//     the trunk that is not pinned in RAM is read from disk every token.
//   - ExpertBytesPerToken: 16 routed experts of 17.55 MB in each of the 92
//     MoE layers = 25.83 GB per token, minus what the expert cache hits.
//   - ModelTableBytes: embed_tokens and lm_head, 163840 x 7168 bf16 each,
//     4.70 GB resident (the ultra preset streams them; lm_head is then read
//     every token).
//
// Per token, at trunk budget T and expert-cache budget C (plan.Presets):
//
//	pinned     = clamp(T - RingBytes, 0, TrunkBytes)     RingBytes: two layers in flight
//	disk bytes = (TrunkBytes - pinned)                   streamed trunk, sequential
//	           + (1 - hit(C)) * ExpertBytesPerToken      expert misses, random 17.55 MB reads
//	           + (ultra ? LMHeadBytes : 0)
//	io s       = trunk part / trunk disk seq GB/s + expert part / expert disk best(qd1, qd8) GB/s
//	compute s  = (TrunkBytes + LMHeadBytes) / bf16 GB/s + ExpertBytesPerToken / mxfp4 GB/s
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
// Peak RSS = T + C + ModelTableBytes + RuntimeBytes (state, KV cache, buffers,
// Go runtime), or T + C + UltraRuntimeBytes for ultra. Against the C
// engine's published peaks (8.2, 31.9, 95.5, ~128, ~224, ~3 GB) this is
// within 0.7 GB, except laptop (9.2 vs 8.2 GB: the safe side).
const (
	TrunkBytes          = 108.8e9
	TrunkLayers         = 93
	ExpertBytes         = 17.55e6
	ExpertsPerToken     = 16 * 92
	ExpertBytesPerToken = ExpertBytes * ExpertsPerToken // 25.83 GB
	ExpertPoolBytes     = 1.45e12
	LMHeadBytes         = 163840 * 7168 * 2
	ModelTableBytes     = 2 * LMHeadBytes
	RingBytes           = 2 * TrunkBytes / TrunkLayers
	RuntimeBytes        = 0.5e9
	UltraRuntimeBytes   = 0.2e9

	// DefaultBF16GBps and DefaultMXFP4GBps are per-core weight-byte rates
	// of the portable exact kernels (machine-limits.md: pure Go scalar
	// exact f64, ~5 GB/s; exact MXFP4 about 0.4 of bf16), used when no
	// measurement is available.
	DefaultBF16GBps  = 5.0
	DefaultMXFP4GBps = 2.0

	// UltraFloorBytes: below this the ultra preset cannot run at all.
	UltraFloorBytes = 3.0e9
	// memoryHeadroom is the share of available memory a preset may plan
	// to use (the engine refuses above 95%; leave the OS some room).
	memoryHeadroom = 0.90
)

// hitPoint is one point of a hit-rate curve: cache GB -> hit fraction.
type hitPoint struct{ gb, hit float64 }

// steadyHits: published-data/memory-ladder.tsv (cache_gb, expert_hit_true),
// with the 90% ceiling at the whole pool.
var steadyHits = []hitPoint{
	{0, 0}, {23.59, 0}, {36.39, 0.2989}, {49.19, 0.322}, {61.99, 0.3308},
	{77.0, 0.3553}, {108.98, 0.4375}, {ExpertPoolBytes / 1e9, 0.90},
}

// traceHits: published-data/expert-cache-capacity.txt, LRU column.
var traceHits = []hitPoint{
	{0, 0}, {8, 0.3624}, {64, 0.3624}, {128, 0.4919}, {192, 0.90}, {ExpertPoolBytes / 1e9, 0.90},
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
}

// Prediction is the cost model's answer for one preset.
type Prediction struct {
	Name                       string  `json:"name"`
	TrunkGB                    float64 `json:"trunk_gb"`
	CacheGB                    float64 `json:"cache_gb"`
	PredictedSecondsPerToken   float64 `json:"predicted_seconds_per_token"`
	OptimisticSecondsPerToken  float64 `json:"optimistic_seconds_per_token"`
	PredictedPeakRSSBytes      int64   `json:"predicted_peak_rss_bytes"`
	DiskBytesPerToken          int64   `json:"disk_bytes_per_token"`
	IOSeconds                  float64 `json:"io_seconds"`
	ComputeSeconds             float64 `json:"compute_seconds"`
	ExpertHitRate              float64 `json:"expert_hit_rate"`
	PinnedTrunkBytes           int64   `json:"pinned_trunk_bytes"`
	StreamedTrunkBytesPerToken int64   `json:"streamed_trunk_bytes_per_token"`
}

// PeakRSS returns the predicted peak resident memory of a preset.
func PeakRSS(p plan.Preset) int64 {
	extra := ModelTableBytes + RuntimeBytes
	if p.Ultra {
		extra = UltraRuntimeBytes
	}
	return int64(p.TrunkGB*plan.GB + p.CacheGB*plan.GB + extra)
}

// Predict applies the cost model to a preset.
func Predict(p plan.Preset, s Speeds) Prediction {
	pinned := math.Min(math.Max(p.TrunkGB*plan.GB-RingBytes, 0), TrunkBytes)
	streamed := TrunkBytes - pinned
	hit, opt := HitRate(p.CacheGB)
	ultraBytes := 0.0
	if p.Ultra {
		ultraBytes = LMHeadBytes
	}
	ioFor := func(h float64) float64 {
		t := (streamed + ultraBytes) / (s.TrunkDiskGBps * 1e9)
		e := (1 - h) * ExpertBytesPerToken / (s.ExpertDiskGBps * 1e9)
		return t + e
	}
	compute := (TrunkBytes+LMHeadBytes)/(s.BF16GBps*1e9) + ExpertBytesPerToken/(s.MXFP4GBps*1e9)
	io := ioFor(hit)
	return Prediction{
		Name: p.Name, TrunkGB: p.TrunkGB, CacheGB: p.CacheGB,
		PredictedSecondsPerToken:   round2(io + compute),
		OptimisticSecondsPerToken:  round2(ioFor(opt) + compute),
		PredictedPeakRSSBytes:      PeakRSS(p),
		DiskBytesPerToken:          int64(streamed + ultraBytes + (1-hit)*ExpertBytesPerToken),
		IOSeconds:                  round2(io),
		ComputeSeconds:             round2(compute),
		ExpertHitRate:              round4(hit),
		PinnedTrunkBytes:           int64(pinned),
		StreamedTrunkBytesPerToken: int64(streamed),
	}
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Choose returns the largest preset whose predicted peak RSS fits in
// memoryHeadroom of the available memory, with its prediction; ok is false
// when not even ultra fits (or less than UltraFloorBytes is available).
func Choose(available uint64, s Speeds) (Prediction, bool) {
	budget := float64(available) * memoryHeadroom
	best := -1
	for i, p := range plan.Presets {
		if float64(PeakRSS(p)) <= budget {
			best = i
		}
	}
	if best < 0 || available < UltraFloorBytes {
		return Predict(plan.Presets[0], s), false
	}
	return Predict(plan.Presets[best], s), true
}
