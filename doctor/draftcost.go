package doctor

import (
	"math"

	"k3/engine/plan"
)

// The released DSpark drafter (Inferact/Kimi-K3-DSpark, docs/DSPARK.md §1)
// in the cost model (docs/BENCHMARKS.md, "Projection at K3 width with the
// released drafter"; tools/bench/dspark_projection.py is the same model).
const (
	// DraftResidentBytes are the drafter's own weights, resident (its
	// file's copy of the embedding is the target's, not loaded twice);
	// DraftFileBytes its file.
	DraftResidentBytes = 4_775_815_682
	DraftFileBytes     = 7_124_633_450
	// DraftPerPosBytes are its context rows per position: 5 layers of a
	// 512 latent and 64 rotary dims, float32.
	DraftPerPosBytes = 5 * (512 + 64) * 4
	// PublishedTokensPerPass is vLLM's mean acceptance of the released
	// drafter on coding with PublishedDrafts draft tokens (2.61 on
	// creative text).
	PublishedTokensPerPass = 4.73
	PublishedDrafts        = 7
)

// Per pass of T positions (k = T-1 drafted tokens), in the units of
// Predict (io + compute, conservative sum):
//
//	pass s    = trunk io + T * expert io                 trunk read once, each position's experts in full
//	          + compute * scale(T)                       a T-position pass, timed at K3 width
//	          + (k > 0 ? T * drafter compute : 0)        its weights once per position at the bf16 rate
//	tokens    = (1 - a^T) / (1 - a)                      each draft accepted with probability a given the ones before
//	s/token   = pass s / tokens
//
// a is fitted so that tokens at PublishedDrafts equals PublishedTokensPerPass
// (AcceptanceFor); the draft length is the best of 0..PublishedDrafts (0:
// plain decoding, exactly Predict's s/token).

// passScale is the compute of a pass of T positions relative to one,
// timed resident at K3 width and scaled to 93 layers (26.7 s at T = 1,
// 50.0 at 2, 98.4 at 4, 211.4 at 9; docs/BENCHMARKS.md), linear between.
func passScale(T int) float64 {
	pts := []struct{ t, s float64 }{{1, 26.7}, {2, 50.0}, {4, 98.4}, {9, 211.4}}
	x := float64(T)
	for i := 1; i < len(pts); i++ {
		if x <= pts[i].t {
			lo, hi := pts[i-1], pts[i]
			return (lo.s + (hi.s-lo.s)*(x-lo.t)/(hi.t-lo.t)) / pts[0].s
		}
	}
	return pts[len(pts)-1].s / pts[0].s
}

// TokensPerPass is the mean tokens a pass yields with k drafts accepted
// each with probability a given the ones before.
func TokensPerPass(a float64, k int) float64 {
	if a >= 1 {
		return float64(k + 1)
	}
	return (1 - math.Pow(a, float64(k+1))) / (1 - a)
}

// AcceptanceFor is the per-position acceptance a with TokensPerPass(a, k)
// = tokens (bisection; tokens within 1..k+1).
func AcceptanceFor(tokens float64, k int) float64 {
	lo, hi := 0.0, 0.9999
	for range 100 {
		a := (lo + hi) / 2
		if TokensPerPass(a, k) < tokens {
			lo = a
		} else {
			hi = a
		}
	}
	return (lo + hi) / 2
}

// SpecSecondsPerToken applies the formula above to one draft length k.
func SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, a float64, k int) float64 {
	T := k + 1
	pass := trunkIO + float64(T)*expertIO + compute*passScale(T)
	if k > 0 {
		pass += float64(T) * draftCompute
	}
	return pass / TokensPerPass(a, k)
}

// DraftPrediction is the released drafter at one preset on this machine.
type DraftPrediction struct {
	Name                 string  `json:"name"`
	Fits                 bool    `json:"fits"`           // resident beside the preset's plan in 95% of the usable memory
	PeakRSSBytes         int64   `json:"peak_rss_bytes"` // the plan with the drafter
	PlainSecondsPerToken float64 `json:"plain_seconds_per_token"`
	SecondsPerToken      float64 `json:"seconds_per_token"` // with the drafter at the best draft length
	DraftLength          int     `json:"draft_length"`      // 0: drafting does not pay here
	TokensPerPass        float64 `json:"tokens_per_pass"`
	Acceptance           float64 `json:"acceptance"` // per position, fitted to PublishedTokensPerPass
	DraftComputeSeconds  float64 `json:"draft_compute_seconds"`
	ExpertIOSeconds      float64 `json:"expert_io_seconds_per_position"`
}

// PredictDraft projects the released drafter at preset p: whether it fits
// in mem (unknown memory: not known to fit) and s/token with and without it.
func PredictDraft(p plan.Preset, s Speeds, mem plan.Memory) DraftPrediction {
	pl := K3.Plan(p.Budget())
	streamed := float64(K3.TrunkBytes - pl.PinnedBytes)
	if p.Ultra {
		streamed += float64(K3.LMHeadBytes)
	}
	hit, _ := HitRate(float64(pl.CacheBytes) / plan.GB)
	trunkIO := streamed / (s.TrunkDiskGBps * 1e9)
	expertIO := (1 - hit) * float64(K3.ExpertBytesPerToken()) / (s.ExpertDiskGBps * 1e9)
	compute := float64(K3.TrunkBytes+K3.LMHeadBytes)/(s.BF16GBps*1e9) + float64(K3.ExpertBytesPerToken())/(s.MXFP4GBps*1e9)
	draftCompute := float64(DraftResidentBytes) / (s.BF16GBps * 1e9)
	a := AcceptanceFor(PublishedTokensPerPass, PublishedDrafts)
	d := DraftPrediction{Name: p.Name, Acceptance: round4(a), DraftComputeSeconds: round2(draftCompute), ExpertIOSeconds: round2(expertIO)}
	plain := SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, a, 0)
	best, bestK := plain, 0
	for k := 1; k <= PublishedDrafts; k++ {
		if v := SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, a, k); v < best {
			best, bestK = v, k
		}
	}
	d.PlainSecondsPerToken, d.SecondsPerToken, d.DraftLength = round2(plain), round2(best), bestK
	d.TokensPerPass = round2(TokensPerPass(a, bestK))
	d.PeakRSSBytes = K3.DraftPlan(p.Budget(), DraftResidentBytes, DraftPerPosBytes).Total
	d.Fits = mem.Usable() > 0 && float64(d.PeakRSSBytes) <= 0.95*float64(mem.Usable())
	return d
}
