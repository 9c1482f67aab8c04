package doctor

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
)

// TestDraftFormulaWorkedExample checks the drafter's cost formula by hand.
func TestDraftFormulaWorkedExample(t *testing.T) {
	// compute-bound: trunk io 10 s, expert io 5 s, compute 20 s, drafter 1 s, a = 0.5, one draft:
	// pass = 10 + 2*5 + 20*(50.0/26.7) + 2*1 = 59.453183521; tokens = 1.5
	assert.InDelta(t, 59.453183521/1.5, SpecSecondsPerToken(10, 5, 20, 1, 0, 0.5, 1), 1e-8)
	// k = 0 is plain decoding: io + compute
	assert.InDelta(t, 35.0, SpecSecondsPerToken(10, 5, 20, 1, 0, 0.5, 0), 1e-12)
	// read-bound: 100 s trunk, 5 s experts, 10 s compute, 0.5 s drafter, a = 0.8, three drafts:
	// pass = 100 + 4*5 + 10*(98.4/26.7) + 4*0.5 = 158.853932584; tokens = (1-0.8^4)/0.2 = 2.952
	assert.InDelta(t, 2.952, TokensPerPass(0.8, 3), 1e-12)
	assert.InDelta(t, 158.853932584/2.952, SpecSecondsPerToken(100, 5, 10, 0.5, 0, 0.8, 3), 1e-8)
	// streamed: its 1.5 s of reads once per drafting pass, none at k = 0
	assert.InDelta(t, (158.853932584+1.5)/2.952, SpecSecondsPerToken(100, 5, 10, 0.5, 1.5, 0.8, 3), 1e-8)
	assert.InDelta(t, 35.0, SpecSecondsPerToken(10, 5, 20, 1, 1.5, 0.5, 0), 1e-12)
	// bytes: 100 trunk + 4 x 5 experts + 7 drafter over 2.952 tokens; plain 105
	assert.InDelta(t, 127/2.952, SpecBytesPerToken(100, 5, 7, 0.8, 3), 1e-9)
	assert.InDelta(t, 105.0, SpecBytesPerToken(100, 5, 7, 0.8, 0), 1e-12)

	// the acceptance fitted to the published means (docs/BENCHMARKS.md: 0.842 coding, 0.626 creative)
	a := AcceptanceFor(4.73, 7)
	assert.InDelta(t, 0.842, a, 5e-4)
	assert.InDelta(t, 4.73, TokensPerPass(a, 7), 1e-6)
	assert.InDelta(t, 0.626, AcceptanceFor(2.61, 7), 5e-4)
}

// TestPredictDraft: per preset, plain s/token equals Predict's, the
// drafter never predicts slower than plain, and where it lives follows the
// memory: resident where the plan with it fits, streamed beside the laptop
// plan near its floor (its plan counting what it keeps, its reads counted
// per drafting cycle), not at all where even that does not fit.
func TestPredictDraft(t *testing.T) {
	s := Speeds{TrunkDiskGBps: 3.41, ExpertDiskGBps: 3.41, BF16GBps: 20, MXFP4GBps: 8}
	laptop, ok := plan.Lookup("laptop")
	require.True(t, ok)
	plain := Predict(laptop, s)
	rows := DraftPerPosBytes * int64(1+plan.ChatStateCopies(int64(laptop.TrunkGB*plan.GB), false)) * (PlanPositions + plan.DefaultMaxDraft)
	floor := plan.Memory{AvailableBytes: int64(float64(plain.PredictedPeakRSSBytes)/0.95) + 1_000_000_000}
	d := PredictDraft(laptop, s, floor)
	assert.Equal(t, plain.PredictedSecondsPerToken, d.PlainSecondsPerToken)
	assert.True(t, d.Fits)
	assert.True(t, d.Streamed)
	assert.Equal(t, int64(DraftStreamReadBytes), d.DraftReadBytes)
	assert.Equal(t, K3.Plan(laptop.Budget()).Total+DraftStreamKeptBytes+rows, d.PeakRSSBytes)
	// read-bound at this speed: drafting pays streamed too, in seconds and bytes
	assert.Greater(t, d.DraftLength, 0)
	assert.Less(t, d.SecondsPerToken, d.PlainSecondsPerToken)
	assert.Less(t, d.BytesPerToken, d.PlainBytesPerToken)
	tight := plan.Memory{AvailableBytes: int64(float64(plain.PredictedPeakRSSBytes)/0.95) + 300_000_000}
	assert.False(t, PredictDraft(laptop, s, tight).Fits, "not even streamed")
	big := plan.Memory{AvailableBytes: 64e9}
	r := PredictDraft(laptop, s, big)
	assert.True(t, r.Fits)
	assert.False(t, r.Streamed)
	assert.Zero(t, r.DraftReadBytes)
	assert.Equal(t, K3.Plan(laptop.Budget()).Total+DraftResidentBytes+rows, r.PeakRSSBytes)
	assert.Less(t, r.BytesPerToken, d.BytesPerToken, "resident reads less than streamed")
	for _, p := range plan.Presets {
		x := PredictDraft(p, s, big)
		assert.LessOrEqual(t, x.SecondsPerToken, x.PlainSecondsPerToken, p.Name)
		assert.Equal(t, Predict(p, s).PredictedSecondsPerToken, x.PlainSecondsPerToken, p.Name)
	}
}

// TestDraftStreamSizes: the streamed drafter's constants add up to the
// released checkpoint's owned bytes: what it reads per cycle, the Markov
// head's first table (read a row at a time), the kv_a projections and
// norms it keeps, and the training-only confidence head.
func TestDraftStreamSizes(t *testing.T) {
	const markov1, confidence, kept = 163840 * 256 * 2, (7168+256)*2 + 2, 192_512 + 513_802_240 + 5*8_257_536
	assert.Equal(t, int64(DraftResidentBytes), int64(DraftStreamReadBytes+markov1+confidence+kept))
	assert.Equal(t, int64(kept+207_618_048), int64(DraftStreamKeptBytes))
	assert.Equal(t, int64(5*(22_020_096+37_748_736+16_777_216+117_440_512+3*205_520_896)+83_886_080), int64(DraftStreamReadBytes))
}

// TestMemoryDocQuotesTheDrafter: docs/MEMORY.md's table of the drafter at
// the floor quotes the doctor's figures (PredictDraft, what `k3 doctor
// --json` reports as drafter[].peak_rss_bytes): the plan without it, with
// it resident and streamed, and the memory available in which it is
// streamed (from the least that fits the streamed plan, Check's 95%, to
// the least that fits the resident one),
// and the section's sizes are the drafter's constants. Before, the figures
// were derived by hand (laptop streamed 7.73 GB where the doctor planned
// 7.74 GB) and did not move with the plan.
func TestMemoryDocQuotesTheDrafter(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixture.Root(), "docs", "MEMORY.md"))
	require.NoError(t, err)
	doc := string(b)
	gb := func(n int64) string { return fmt.Sprintf("%.2f", float64(n)/plan.GB) }
	// the least memory, to 0.01 GB, that a plan of n bytes fits (Check)
	fits := func(n int64) string { return fmt.Sprintf("%.2f", math.Ceil(float64(n)/0.95/1e7)/100) }
	s := Speeds{TrunkDiskGBps: 3.41, ExpertDiskGBps: 3.41, BF16GBps: 20, MXFP4GBps: 8}
	for _, name := range []string{"ultra", "laptop"} {
		p, ok := plan.Lookup(name)
		require.True(t, ok)
		resident := PredictDraft(p, s, plan.Memory{AvailableBytes: 1e12})
		require.False(t, resident.Streamed, name)
		streamed := PredictDraft(p, s, plan.Memory{AvailableBytes: int64(float64(resident.PeakRSSBytes)/0.95) - 1})
		require.True(t, streamed.Streamed && streamed.Fits, name)
		row := regexp.MustCompile(`(?m)^\| ` + name + ` \| ([0-9.]+) GB \| ([0-9.]+) GB \| ([0-9.]+) GB \| streamed with ([0-9.]+)-([0-9.]+) GB available`).FindStringSubmatch(doc)
		require.NotNil(t, row, "docs/MEMORY.md's drafter row for %s", name)
		assert.Equal(t, []string{gb(Need(p.Budget())), gb(resident.PeakRSSBytes), gb(streamed.PeakRSSBytes),
			fits(streamed.PeakRSSBytes), fits(resident.PeakRSSBytes)}, row[1:], name)
	}
	assert.Contains(t, doc, "("+gb(DraftResidentBytes)+" GB\nof weights at K3 width")
	assert.Contains(t, doc, "it then keeps "+gb(DraftStreamKeptBytes)+" GB")
	assert.Contains(t, doc, "reads "+gb(DraftStreamReadBytes)+" GB per drafting cycle")
}
