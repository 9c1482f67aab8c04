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
	// DraftStreamReadBytes are what the drafter reads per drafting cycle
	// streamed (docs/DSPARK.md §6.1): every matrix but the context and
	// kv_a projections (the context rows of every position need them) and
	// the Markov head's first table (a row per drafted token): 5 x
	// 810,549,248 (a layer's q_a, q_b, kv_b, o, gate, up, down) +
	// 83,886,080 (markov_w2). DraftStreamKeptBytes are what it keeps then:
	// the norms (192,512), context_proj (513,802,240), the kv_a projections
	// (5 x 8,257,536) and the buffer of its largest streamed matrix, a
	// gate, up or down projection (205,520,896 bytes) from the page it
	// starts in, mapped in 2 MiB huge pages: 99 of them.
	DraftStreamReadBytes = 4_136_632_320
	DraftStreamKeptBytes = 192_512 + 513_802_240 + 5*8_257_536 + 99*plan.HugePage
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
//	          + (k > 0 ? drafter io : 0)                 streamed: its matrices read once per cycle
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

// SpecSecondsPerToken applies the formula above to one draft length k
// (draftIO 0: the drafter is resident).
func SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, draftIO, a float64, k int) float64 {
	T := k + 1
	pass := trunkIO + float64(T)*expertIO + compute*passScale(T)
	if k > 0 {
		pass += float64(T)*draftCompute + draftIO
	}
	return pass / TokensPerPass(a, k)
}

// SpecBytesPerToken is what a pass of draft length k reads per token it
// yields: the streamed trunk once, each position's expert misses, and a
// streamed drafter's matrices once (draftRead 0: resident).
func SpecBytesPerToken(trunk, expertPerPos, draftRead, a float64, k int) float64 {
	pass := trunk + float64(k+1)*expertPerPos
	if k > 0 {
		pass += draftRead
	}
	return pass / TokensPerPass(a, k)
}

// DraftPrediction is the released drafter at one preset on this machine.
type DraftPrediction struct {
	Name string `json:"name"`
	// Fits: beside the preset's plan in 95% of the usable memory,
	// resident, or Streamed where only that fits (plan.PlaceDraft)
	Fits         bool  `json:"fits"`
	Streamed     bool  `json:"streamed"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"` // the plan with the drafter
	// PlainBytesPerToken and BytesPerToken are the bytes read per token
	// without and with it (the streamed trunk, the expert misses and,
	// streamed, its matrices once per cycle); DraftReadBytes what it
	// reads per cycle (0: resident)
	PlainBytesPerToken   float64 `json:"plain_bytes_per_token"`
	BytesPerToken        float64 `json:"bytes_per_token"`
	DraftReadBytes       int64   `json:"draft_read_bytes"`
	PlainSecondsPerToken float64 `json:"plain_seconds_per_token"`
	SecondsPerToken      float64 `json:"seconds_per_token"` // with the drafter at the best draft length
	DraftLength          int     `json:"draft_length"`      // 0: drafting does not pay here
	TokensPerPass        float64 `json:"tokens_per_pass"`
	Acceptance           float64 `json:"acceptance"` // per position, fitted to PublishedTokensPerPass
	DraftComputeSeconds  float64 `json:"draft_compute_seconds"`
	ExpertIOSeconds      float64 `json:"expert_io_seconds_per_position"`
}

// PredictDraft projects the released drafter at preset p: where it
// lives in mem (resident where it fits, else streamed; unknown memory: not
// known to fit, counted resident) and s/token and bytes per token with and
// without it.
func PredictDraft(p plan.Preset, s Speeds, mem plan.Memory) DraftPrediction {
	pl := K3.Plan(p.Budget())
	streamed := float64(K3.TrunkBytes - pl.PinnedBytes)
	if p.Ultra {
		streamed += float64(K3.LMHeadBytes)
	}
	hit, _ := HitRate(float64(pl.CacheBytes) / plan.GB)
	expertBytes := (1 - hit) * float64(K3.ExpertBytesPerToken())
	trunkIO := streamed / (s.TrunkDiskGBps * 1e9)
	expertIO := expertBytes / (s.ExpertDiskGBps * 1e9)
	compute := float64(K3.TrunkBytes+K3.LMHeadBytes)/(s.BF16GBps*1e9) + float64(K3.ExpertBytesPerToken())/(s.MXFP4GBps*1e9)
	draftCompute := float64(DraftResidentBytes) / (s.BF16GBps * 1e9)
	a := AcceptanceFor(PublishedTokensPerPass, PublishedDrafts)
	d := DraftPrediction{Name: p.Name, Acceptance: round4(a), DraftComputeSeconds: round2(draftCompute), ExpertIOSeconds: round2(expertIO)}
	d.place(p, mem)
	draftIO := float64(d.DraftReadBytes) / (s.TrunkDiskGBps * 1e9)
	plain := SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, draftIO, a, 0)
	best, bestK := plain, 0
	for k := 1; k <= PublishedDrafts; k++ {
		if v := SpecSecondsPerToken(trunkIO, expertIO, compute, draftCompute, draftIO, a, k); v < best {
			best, bestK = v, k
		}
	}
	d.PlainSecondsPerToken, d.SecondsPerToken, d.DraftLength = round2(plain), round2(best), bestK
	d.TokensPerPass = round2(TokensPerPass(a, bestK))
	d.PlainBytesPerToken = math.Round(SpecBytesPerToken(streamed, expertBytes, 0, a, 0))
	d.BytesPerToken = math.Round(SpecBytesPerToken(streamed, expertBytes, float64(d.DraftReadBytes), a, bestK))
	return d
}

// place decides where the drafter lives at preset p in mem, as the engine
// does (plan.PlaceDraft): resident where that plan fits, else streamed.
func (d *DraftPrediction) place(p plan.Preset, mem plan.Memory) {
	resident := K3.DraftPlan(p.Budget(), DraftResidentBytes, DraftPerPosBytes, DraftStreamKeptBytes, DraftStreamReadBytes, false)
	d.PeakRSSBytes = resident.Total
	fits := func(total int64) bool { return mem.Usable() > 0 && float64(total) <= 0.95*float64(mem.Usable()) }
	d.Fits = fits(resident.Total)
	if d.Fits || mem.Usable() <= 0 {
		return
	}
	streamed := K3.DraftPlan(p.Budget(), DraftResidentBytes, DraftPerPosBytes, DraftStreamKeptBytes, DraftStreamReadBytes, true)
	d.Streamed, d.PeakRSSBytes, d.DraftReadBytes = true, streamed.Total, DraftStreamReadBytes
	d.Fits = fits(streamed.Total)
}
