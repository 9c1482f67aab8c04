package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
	"k3/kernels"
	"k3/storage/trunk"
	"k3/storage/units"
)

// TestDraftStreamedSame: a streamed draft model drafts the tokens a
// resident one does, pass after pass, and the run's ids, logits and state
// are plain decoding's bit for bit: greedy and seeded, forced and chosen
// by the controller, at every kernel level on 1 and 2 threads, with the
// trunk resident and streamed through one ring slot at tiny budgets. When
// the controller chooses, a streamed draft model proposes only before a
// pass (docs/DSPARK.md §6.1) and so may draft at other passes than a
// resident one: there the two streamed setups draft alike.
func TestDraftStreamedSame(t *testing.T) {
	for _, name := range draftModels {
		ex := fixture.LoadExpect(t, name)
		plainModel, err := Open(fixture.ModelDir(name), Options{Budget: Budget{CacheBytes: 1 << 40}})
		require.NoError(t, err)
		defer plainModel.Close()
		resident := openWithDraft(t, name, Options{})
		require.False(t, resident.Plan.DraftStreamed)
		tr := filepath.Join(t.TempDir(), "trunk")
		_, err = trunk.Pack(context.Background(), fixture.ModelDir(name), tr, trunk.Options{})
		require.NoError(t, err)
		streamed := map[string]*Model{
			"resident trunk": openWithDraft(t, name, Options{DraftStream: true}),
			"tiny budgets":   openWithDraft(t, name, Options{DraftStream: true, TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}}),
		}
		p := ex.Prompts[0]
		for _, l := range kernels.Levels() {
			for _, threads := range []int{1, 2} {
				prev := kernels.SetLevel(l)
				for _, seeded := range []bool{false, true} {
					opt := GenOptions{MaxTokens: 12, Complete: true, Spec: SpecOff}
					if seeded {
						opt.Sampler = Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 5}.Sampler(2)
					}
					plain := generateCase(t, plainModel, threads, p.PromptIDs, opt)
					for _, spec := range []Spec{4, SpecAuto} {
						opt.Spec, opt.Trace = spec, nil
						if spec == SpecAuto {
							opt.Trace = &GenTrace{SpecCosts: draftPays}
						}
						var want [][]int
						opt.onDraft = func(d []int) { want = append(want, append([]int(nil), d...)) }
						requireSameRun(t, fmt.Sprintf("%s resident %v threads=%d seeded=%v spec %v", name, l, threads, seeded, spec), generateCase(t, resident, threads, p.PromptIDs, opt), plain)
						require.NotEmpty(t, want)
						var lazy [][]int // the first streamed setup's drafts, chosen by the controller
						for _, how := range []string{"resident trunk", "tiny budgets"} {
							what := fmt.Sprintf("%s streamed (%s) %v threads=%d seeded=%v spec %v", name, how, l, threads, seeded, spec)
							var got [][]int
							opt.onDraft = func(d []int) { got = append(got, append([]int(nil), d...)) }
							r := generateCase(t, streamed[how], threads, p.PromptIDs, opt)
							requireSameRun(t, what, r, plain)
							switch {
							case spec != SpecAuto:
								require.Equal(t, want, got, what+": drafts")
							case lazy == nil:
								require.NotEmpty(t, got, what)
								lazy = got
							default:
								require.Equal(t, lazy, got, what+": drafts")
							}
							assert.Positive(t, r.res.Stats.DraftBytesRead, what)
						}
					}
				}
				kernels.SetLevel(prev)
			}
		}
	}
}

// TestDraftStreamedReadsOncePerCycle: a streamed draft model reads each
// streamed matrix once per block pass, plus one row of the Markov head's
// first table per drafted token, and nothing for the context rows of the
// positions a pass computed (their context and kv_a projections stay
// resident with the norms): the bytes counted are exactly that. A
// generation the controller does not draft in reads nothing of it.
func TestDraftStreamedReadsOncePerCycle(t *testing.T) {
	for _, name := range draftModels {
		ex := fixture.LoadExpect(t, name)
		m := openWithDraft(t, name, Options{DraftStream: true})
		d := m.DraftModel()
		require.True(t, m.Plan.DraftStreamed)
		m1, ok := d.set.Get(draftRowRead)
		require.True(t, ok)
		rowBytes := m1.Size / int64(d.Cfg.VocabSize)
		var blocks, rows int
		opt := GenOptions{MaxTokens: 12, Complete: true, Spec: 3, onDraft: func(dr []int) { blocks++; rows += len(dr) }}
		r := generateCase(t, m, 1, ex.Prompts[0].PromptIDs, opt)
		require.Positive(t, blocks)
		assert.Equal(t, int64(blocks)*d.ReadBytes+int64(rows)*rowBytes, r.res.Stats.DraftBytesRead, name)
		// what it keeps: the resident parts and the buffer of its largest streamed matrix
		read, buffer, small := streamSizes(d.set)
		assert.Equal(t, small+draftBufferBytes(buffer), d.StreamBytes, name)
		assert.Equal(t, buffer+4096, draftBufferBytes(buffer), name) // below a huge page: on the heap
		assert.Equal(t, int64(99*plan.HugePage), draftBufferBytes(205_520_896+4096), "K3 width: 99 huge pages")
		assert.Equal(t, read, d.ReadBytes, name)
		gate, ok := d.set.Get("layers.0.mlp.gate_proj.weight")
		require.True(t, ok)
		assert.GreaterOrEqual(t, buffer, gate.Size, name)
		ctx, ok := d.set.Get("context_proj.weight")
		require.True(t, ok)
		assert.GreaterOrEqual(t, small, ctx.Size, name)
		assert.Less(t, d.StreamBytes, d.Bytes, name)

		// drafting never pays: nothing proposed, nothing read
		opt = GenOptions{MaxTokens: 12, Complete: true, Spec: SpecAuto, Trace: &GenTrace{SpecCosts: func(T int) float64 { return float64(T * T) }}}
		r = generateCase(t, m, 1, ex.Prompts[0].PromptIDs, opt)
		assert.Zero(t, r.res.Stats.SpecDrafted, name)
		assert.Zero(t, r.res.Stats.DraftBytesRead, name)
	}
}

// TestDraftReadsCosted: a streamed draft model's reads are added to the
// modelled cost of every pass that drafts, at the measured disk speed.
func TestDraftReadsCosted(t *testing.T) {
	c := &specCosts{diskBps: 1e6}
	cost := c.withDraftReads(func(T int) float64 { return 10 + float64(T) }, 2e6)
	assert.Equal(t, 11.0, cost(1), "a plain pass reads none of it")
	assert.Equal(t, 10+3+2.0, cost(3))
	c.diskBps = 0 // nothing measured yet: nothing to add
	assert.Equal(t, 13.0, cost(3))
}

// TestDraftPlacedByMemory: the plan keeps the draft model resident where
// it fits beside the rest, streams it where only that fits (and the run
// opens instead of being refused), and refuses a machine too small for
// either, naming the streamed drafter's share.
func TestDraftPlacedByMemory(t *testing.T) {
	base := planBaseline
	planBaseline = func() int64 { return 40 << 20 } // the plans below compare within a few MB
	defer func() { planBaseline = base }()
	dir := fixture.ModelDir("demo")
	o := Options{Draft: draftDir("demo"), Budget: Budget{CacheBytes: 1 << 40}, Positions: 256, Chunk: 64}
	plans := func() (resident, streamed *plan.Plan) {
		rp, err := PlanFor(dir, o)
		require.NoError(t, err)
		so := o
		so.DraftStream = true
		sp, err := PlanFor(dir, so)
		require.NoError(t, err)
		require.False(t, rp.DraftStreamed)
		require.True(t, sp.DraftStreamed)
		require.Less(t, sp.Total, rp.Total)
		return rp, sp
	}
	memFor := func(total int64) *plan.Memory { return &plan.Memory{AvailableBytes: int64(float64(total) / 0.95)} }
	for _, streamed := range []bool{false, true} {
		rp, sp := plans()
		mo := o
		mo.Memory = memFor(rp.Total + 1<<16) // room for it resident
		if streamed {
			mo.Memory = memFor((rp.Total + sp.Total) / 2) // room for it streamed only
		}
		m, err := Open(dir, mo)
		require.NoError(t, err, "streamed %v", streamed)
		assert.Equal(t, streamed, m.Plan.DraftStreamed)
		assert.Equal(t, streamed, m.DraftModel().stream != nil)
		if streamed {
			assert.Contains(t, m.Plan.String(), "streamed: ")
		}
		m.Close()
	}
	_, sp := plans()
	o.Memory = memFor(sp.Total / 2)
	_, err := Open(dir, o)
	var pe *PlanError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "with the draft model ("+units.Bytes(pe.Plan.Draft)+" of it: its weights and context rows, streamed")
}
