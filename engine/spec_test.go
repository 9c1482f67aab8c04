package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/config"
	"k3/storage/trunk"
)

// oracleDrafts proposes the continuation of ref (the ids a plain run made)
// and spoils one drafted token per pass, at an index that cycles through
// every position and past the end: passes accept all of a draft, none of
// it, or a part. ref must be what the sampler picks, so acceptance happens.
func oracleDrafts(ref []int, vocab int) func(ids []int, k int) []int {
	pass := 0
	return func(ids []int, k int) []int {
		pass++
		var d []int
		for j := 0; j < k && len(ids)+j < len(ref); j++ {
			d = append(d, ref[len(ids)+j])
		}
		if bad := pass % (k + 2); bad < len(d) {
			d[bad] = (d[bad] + 1) % vocab
		}
		return d
	}
}

// draftPays is a pass cost where the trunk read dominates (a draft token
// costs a hundredth of a pass): the controller drafts whatever has come
// true.
func draftPays(T int) float64 { return 100 + float64(T) }

// specRun is one generation's outcome.
type specRun struct {
	res   *GenResult
	state []byte
}

func generateCase(t *testing.T, m *Model, threads int, prompt []int, opt GenOptions) specRun {
	t.Helper()
	e := m.NewEngine(threads)
	defer e.Close()
	opt.keepLogits = true
	res, err := e.Generate(context.Background(), nil, prompt, opt)
	require.NoError(t, err)
	return specRun{res, stateBytes(t, m, res.State)}
}

// requireSameRun fails unless two runs chose the same tokens from the same
// logits bits and left the same state bytes.
func requireSameRun(t *testing.T, what string, got, want specRun) {
	t.Helper()
	require.Equal(t, want.res.Generated, got.res.Generated, "%s: ids", what)
	require.Equal(t, want.res.Stop, got.res.Stop, "%s: stop", what)
	require.Len(t, got.res.logits, len(want.res.logits), what)
	for i := range want.res.logits {
		requireSameBits(t, fmt.Sprintf("%s: logits of token %d", what, i), got.res.logits[i], want.res.logits[i])
	}
	require.Equal(t, want.state, got.state, "%s: state after the run", what)
}

// TestSpecExact: speculative decoding gives the ids, the logits of every
// token and the final state of plain decoding, bit for bit, on every
// reference checkpoint, resident, streamed through one ring slot, with an
// expert cache that evicts every step, on 1 to 3 threads, for forced draft lengths 1, 3 and 8 whose drafts are accepted
// wholly, partly or not at all, for the engine's own drafter, and when a
// stop token or the token cap ends generation inside a verified draft. In
// ultra-low-memory mode nothing is drafted, forced or by the controller (no
// verification record is planned there): the same run, one pass a token.
func TestSpecExact(t *testing.T) {
	var drafted, accepted, partial, autoDrafted int64
	for _, name := range fixture.Models {
		ex := fixture.LoadExpect(t, name)
		dir := fixture.ModelDir(name)
		tr := filepath.Join(t.TempDir(), "trunk")
		_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
		require.NoError(t, err)
		big := int64(1 << 40)
		budgets := []struct {
			name    string
			opt     Options
			threads int
		}{
			{"resident", Options{Budget: Budget{CacheBytes: big}}, 2},
			{"ring 1", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: big}}, 1},
			{"tiny expert cache", Options{Budget: Budget{CacheBytes: 1}}, 3},
			{"ultra", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 2, CacheBytes: 1, Ultra: true}}, 2},
		}
		for _, b := range budgets {
			m, err := Open(dir, b.opt)
			require.NoError(t, err)
			V := m.Cfg.VocabSize
			// every case resident; the slower budgets (expert and trunk
			// reads every step) the first prompt with two lengths
			prompts, lengths := ex.Prompts[:2], []Spec{1, 3, 8}
			if b.name != "resident" {
				prompts, lengths = ex.Prompts[:1], []Spec{2, 8}
			}
			for pi, p := range prompts {
				what := fmt.Sprintf("%s, %s, prompt %d", name, b.name, pi)
				plain := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: SpecOff, Complete: true})
				require.Equal(t, p.GreedyIDs, plain.res.Generated[:len(p.GreedyIDs)], what)
				ref := plain.res.FullIDs()
				if pi > 0 {
					lengths = []Spec{5}
				}
				for _, k := range lengths {
					r := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: k, Complete: true, Trace: &GenTrace{Propose: oracleDrafts(ref, V)}})
					requireSameRun(t, fmt.Sprintf("%s, spec %d", what, k), r, plain)
					if b.opt.Budget.Ultra {
						// ultra drafts nothing (as the C engine, which refuses
						// --spec there): one pass a token, no record planned
						assert.Zero(t, r.res.Stats.SpecDrafted, "%s, spec %d: drafted at ultra", what, k)
						assert.Equal(t, plain.res.DecodePasses, r.res.DecodePasses, "%s, spec %d: passes", what, k)
						continue
					}
					drafted += r.res.Stats.SpecDrafted
					accepted += r.res.Stats.SpecAccepted
					assert.Less(t, r.res.DecodePasses, plain.res.DecodePasses, "%s, spec %d: passes", what, k)
				}
				if b.opt.Budget.Ultra {
					assert.Equal(t, 1, m.recordCap(), "%s: the plan records one position (a plain pass at the floor)", what)
				}
				own := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: 4, Complete: true})
				requireSameRun(t, what+", own drafter", own, plain)
				// the controller, at costs where a draft pays as soon as
				// matches come true, with the engine's drafter
				auto := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Complete: true, Trace: &GenTrace{SpecCosts: draftPays}})
				requireSameRun(t, what+", auto", auto, plain)
				if b.opt.Budget.Ultra {
					assert.Zero(t, auto.res.Stats.SpecDrafted, "%s: the controller drafted at ultra", what)
				}
				autoDrafted += auto.res.Stats.SpecDrafted
				if pi > 0 || b.name != "resident" {
					continue
				}
				// ended inside a verified draft: by a stop id, by the cap
				stop := plain.res.Generated[9]
				cut := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: SpecOff, StopIDs: []int{stop}})
				r := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: 8, StopIDs: []int{stop}, Trace: &GenTrace{Propose: oracleDrafts(ref, V)}})
				requireSameRun(t, what+", stop id", r, cut)
				capped := generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 13, Spec: SpecOff})
				r = generateCase(t, m, b.threads, p.PromptIDs, GenOptions{MaxTokens: 13, Spec: 8, Trace: &GenTrace{Propose: oracleDrafts(ref, V)}})
				requireSameRun(t, what+", token cap", r, capped)
				if a := r.res.Stats.SpecAccepted; a > 0 && a < r.res.Stats.SpecDrafted {
					partial++
				}
			}
			m.Close()
		}
	}
	t.Logf("%d drafts verified, %d accepted; the controller drafted %d", drafted, accepted, autoDrafted)
	require.Greater(t, accepted, int64(0))
	require.Greater(t, autoDrafted, int64(0))
	require.Less(t, accepted, drafted)
	require.Greater(t, partial, int64(0))
}

// TestSpecSampledExact: with a seeded sampler, speculative decoding picks
// the ids plain decoding picks (each position draws from its own stream).
// The prompt is the checkpoint's first whose sampled ids are not the greedy
// ones (the demo knows some of its sayings so well that sampling at 0.9
// repeats them).
func TestSpecSampledExact(t *testing.T) {
	for _, name := range fixture.Models {
		m := openCase(t, name, 0)
		sampling := Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 11}
		opt := GenOptions{MaxTokens: 30, Sampler: sampling.Sampler(2), Spec: SpecOff, Complete: true}
		var p fixture.Prompt
		var plain specRun
		for i, q := range fixture.LoadExpect(t, name).Prompts {
			plain = generateCase(t, m, 2, q.PromptIDs, opt)
			if greedy := generateCase(t, m, 2, q.PromptIDs, GenOptions{MaxTokens: 30}); !slices.Equal(greedy.res.Generated, plain.res.Generated) {
				p = q
				t.Logf("%s: prompt %d", name, i)
				break
			}
		}
		require.NotNil(t, p.PromptIDs, "%s: sampling at 0.9 gave the greedy ids for every prompt", name)
		for _, k := range []Spec{2, 6} {
			opt.Spec, opt.Trace = k, &GenTrace{Propose: oracleDrafts(plain.res.FullIDs(), m.Cfg.VocabSize)}
			r := generateCase(t, m, 2, p.PromptIDs, opt)
			requireSameRun(t, fmt.Sprintf("%s sampled, spec %d", name, k), r, plain)
			require.Greater(t, r.res.Stats.SpecAccepted, int64(0))
		}
		opt.Spec, opt.Trace = SpecAuto, &GenTrace{SpecCosts: draftPays}
		requireSameRun(t, name+" sampled, auto", generateCase(t, m, 2, p.PromptIDs, opt), plain)
	}
}

// TestSpecCancelInsidePass: cancelling during a verification pass leaves
// the state plain decoding leaves when cancelled before the same token's
// forward, and the tokens made so far.
func TestSpecCancelInsidePass(t *testing.T) {
	name := "tiny-release"
	p := fixture.LoadExpect(t, name).Prompts[0]
	plain := generateCase(t, openCase(t, name, 0), 2, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: SpecOff})
	ref := plain.res.FullIDs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	passes := 0
	m, err := Open(fixture.ModelDir(name), Options{Budget: Budget{CacheBytes: 1 << 40}, Trace: func(layer, expert int) {
		if passes == 3 && layer == 4 {
			cancel()
		}
	}})
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(2)
	defer e.Close()
	drafts := oracleDrafts(ref, m.Cfg.VocabSize)
	res, err := e.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: 20, Spec: 5, Trace: &GenTrace{Propose: func(ids []int, k int) []int {
		passes++
		return drafts(ids, k)
	}}})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, StopCancelled, res.Stop)
	n := len(res.Generated)
	require.Greater(t, n, 3)
	require.Equal(t, plain.res.Generated[:n], res.Generated)
	// the state holds every id but the last token, which the cancelled pass was feeding
	fresh := m.NewState()
	_, err = e.Feed(context.Background(), fresh, ref[:len(p.PromptIDs)+n-1], false)
	require.NoError(t, err)
	require.Equal(t, stateBytes(t, m, fresh), stateBytes(t, m, res.State))
}

func TestProposeDraft(t *testing.T) {
	// the longest suffix match wins over a more recent shorter one
	ids := []int{1, 2, 3, 4, 9, 3, 7, 8, 2, 3}
	assert.Equal(t, []int{4, 9, 3}, proposeDraft(ids, 3))
	// the most recent of equally long matches; one matched token proposes two at most
	assert.Equal(t, []int{7, 5}, proposeDraft([]int{5, 6, 5, 7, 5}, 4))
	// a repeating stretch continues past the end of the context
	assert.Equal(t, []int{1, 2, 3, 1, 2, 3}, proposeDraft([]int{1, 2, 3, 1, 2, 3}, 7))
	assert.Nil(t, proposeDraft([]int{1, 2, 3}, 4), "no earlier occurrence of the last token")
	assert.Nil(t, proposeDraft([]int{1, 1}, 0))
	assert.Equal(t, []int{1, 1}, proposeDraft([]int{1, 1}, 3))
	assert.Equal(t, []int{1, 1, 1, 1}, proposeDraft([]int{1, 1, 1}, 4))
	// of equally long matches, the continuation that followed most often
	assert.Equal(t, []int{2, 1}, proposeDraft([]int{1, 2, 1, 2, 1, 3, 1}, 4))
	d, n := suggestDraft([]int{8, 1, 2, 9, 8, 1, 2}, 8)
	assert.Equal(t, []int{9, 8, 1, 2, 9, 8}, d)
	assert.Equal(t, 3, n)
}

func TestChooseDraft(t *testing.T) {
	flat := func(a float64) []float64 { return []float64{a, a, a, a, a, a, a, a} }
	// compute-bound, nothing read: every position costs a whole pass
	resident := specCosts{compute1: 0.1}
	for _, a := range []float64{0.2, 0.9, 0.99} {
		assert.Equal(t, 0, chooseDraft(flat(a), resident.passCost), "acceptance %.2f", a)
	}
	// streamed: the trunk read dominates, each position adds a little
	streamed := specCosts{trunkBytes: 100e9, expertBytes: 3e9, diskBps: 3e9, compute1: 2, slope: 0.5, slopeKnown: true}
	assert.Equal(t, 8, chooseDraft(flat(0.9), streamed.passCost))
	low := chooseDraft(flat(0.3), streamed.passCost)
	assert.Greater(t, low, 0)
	assert.Less(t, low, 8)
	assert.Equal(t, 0, chooseDraft(flat(0.01), streamed.passCost))
	// the depths are measured apart: sure for two tokens, then nothing
	assert.Equal(t, 2, chooseDraft([]float64{0.95, 0.95, 0, 0, 0}, streamed.passCost))
	assert.Equal(t, 0, chooseDraft(nil, streamed.passCost), "nothing proposed")
	// expert misses only (the trunk resident): no fixed read to share
	misses := specCosts{expertBytes: 20e9, diskBps: 2e9, compute1: 1, slope: 0.1, slopeKnown: true}
	assert.Equal(t, 0, chooseDraft(flat(0.8), misses.passCost))
	// nothing measured yet
	assert.Equal(t, 0, chooseDraft(flat(0.9), (&specCosts{}).passCost))
}

// TestSpecControlAcceptance: the controller checks what the drafter would
// propose at every position against the tokens that come, drafted or not;
// it drafts once matches have come true and stops when they no longer do.
func TestSpecControlAcceptance(t *testing.T) {
	// the laptop preset, read-bound: a draft token costs a quarter of a pass
	streamed := specCosts{trunkBytes: 108e9, expertBytes: 26e9, diskBps: 2e9, compute1: 2, slope: 0.5, slopeKnown: true}
	c := newSpecControl(8, streamed.passCost)
	assert.Equal(t, []float64{specPrior, specPrior}, c.acceptance(1, 2), "no evidence yet")
	ids := []int{4, 5, 7, 9, 8, 4, 5} // the suffix 4 5 matched: class 1
	c.start(ids)
	assert.Equal(t, openDraft{draft: []int{7, 9, 8, 4}, class: 1, pos: 7}, c.next, "the proposal at the end of the prompt")
	assert.Nil(t, c.draft(ids, 100), "no drafting before drafts have come true")
	for _, id := range []int{7, 9, 8, 4} {
		ids = append(ids, id)
		c.observeToken(ids)
	}
	// the proposal at 7 came true four times over; those made after it
	// (matches of 1 to 3 tokens) were checked too
	a := c.acceptance(1, 4)
	for j := range a {
		assert.Greater(t, a[j], 0.4, "depth %d", j)
	}
	assert.Equal(t, 1.0, c.hit[1][3]+c.seen[1][3]-1, "one class-1 token checked at depth 4, and it came true")
	// the text goes on repeating: 4 5 7 9 8 4 5 7 9 8 4 ...
	ids = append(ids, 5)
	c.observeToken(ids)
	d := c.draft(ids, 100)
	assert.Equal(t, 3, c.next.class, "matched 4 5 7 9 8 4 5")
	assert.Equal(t, []int{7, 9, 8, 4, 5, 7, 9, 8}, c.next.draft)
	assert.Equal(t, []int{7, 9}, d, "two deep: the deeper depths have one check each")
	assert.Len(t, c.draft(ids, 3), 2, "room for 3 more tokens: 2 drafts and the token after them")
	// once more round: the deeper depths have come true again
	for _, id := range []int{7, 9, 8, 4, 5} {
		ids = append(ids, id)
		c.observeToken(ids)
	}
	assert.Equal(t, []int{7, 9, 8, 4}, c.draft(ids, 100), "drafted as deep as drafts have come true")
	// then 4 5 is followed by something new every time: drafted or not,
	// the proposals fail, and the controller stops drafting
	for i := 0; i < 10; i++ {
		ids = append(ids, 100+i, 4, 5)
		for j := len(ids) - 3; j < len(ids); j++ {
			c.observeToken(ids[:j+1])
		}
	}
	assert.Equal(t, 1, c.next.class)
	assert.NotEmpty(t, c.next.draft)
	assert.Nil(t, c.draft(ids, 100), "matches stopped coming true: no draft")
	// forced: always the longest the match allows
	long := []int{4, 5, 6, 7, 9, 4, 5, 6}
	f := newSpecControl(8, streamed.passCost)
	f.forced = true
	assert.Equal(t, []int{7, 9, 4, 5, 6, 7}, f.draft(long, 100))
	assert.Nil(t, f.draft([]int{1, 2, 3}, 100), "no match, no draft")
	f.observeToken(long)
	assert.Empty(t, f.open, "forced: nothing to measure")
	// compute-bound: no draft could pay, nothing is proposed
	r := newSpecControl(8, (&specCosts{compute1: 0.1}).passCost)
	r.start(long)
	r.observeToken(append(long, 7))
	assert.Empty(t, r.open)
	assert.Nil(t, r.draft(append(long, 7), 100))
}

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{"auto": SpecAuto, "off": SpecOff, "0": SpecOff, "5": 5} {
		got, err := ParseSpec(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"-1", "x", "65"} {
		_, err := ParseSpec(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, "auto", SpecAuto.String())
	assert.Equal(t, "off", SpecOff.String())
	assert.Equal(t, "3", Spec(3).String())
}

// TestSimulateSpec: the simulated decode loop makes every token once, the
// controller drafts on a repetitive reply when the trunk streams and never
// when the pass is compute-bound, and a pass's bytes are the trunk once
// plus each position's experts.
func TestSimulateSpec(t *testing.T) {
	var ids []int
	for i := 0; i < 30; i++ {
		ids = append(ids, i%7, 100+i) // a prompt with some pairs repeated later
	}
	for r := 0; r < 6; r++ {
		ids = append(ids, 1, 2, 3, 4, 5, 6, 7, 8) // the reply repeats itself
	}
	start := 60
	streamed := PassCosts{TrunkBytes: 100e9, ExpertBytes: 20e9, DiskBps: 2e9, Compute: []float64{0, 3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7}, Overlap: 1}
	off := SimulateSpec(ids, start, SpecOff, 8, streamed)
	assert.Equal(t, SpecSim{Tokens: 48, Passes: 47, Bytes: 47 * 120e9, Seconds: 47 * 60, Lengths: []int{47, 0, 0, 0, 0, 0, 0, 0, 0}}, off)
	auto := SimulateSpec(ids, start, SpecAuto, 8, streamed)
	assert.Equal(t, auto.Tokens, auto.Passes+1+auto.Accepted)
	assert.Greater(t, auto.Accepted, 20)
	assert.Less(t, auto.Seconds, 0.6*off.Seconds)
	assert.Less(t, auto.BytesPerToken(), 0.6*off.BytesPerToken())
	assert.InDelta(t, 120e9, off.BytesPerToken(), 1)
	// compute-bound: every position costs a full pass, nothing is read
	resident := PassCosts{DiskBps: 1, Compute: []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}
	assert.Equal(t, 0, SimulateSpec(ids, start, SpecAuto, 8, resident).Drafted)
	forced := SimulateSpec(ids, start, 4, 8, resident)
	assert.Greater(t, forced.Drafted, 0)
	assert.Equal(t, 0, forced.Lengths[5]+forced.Lengths[8], "forced to 4")
}

// TestRollbackRecordAtK3: the rollback record of the released model is
// 20.4 MB per position (69 KDA layers of 96 heads of 128), 183 MB for a
// pass of the default longest draft; a copy of the KDA state per position
// would be 0.46 GB each.
func TestRollbackRecordAtK3(t *testing.T) {
	c, err := config.Load(fixture.Path("kimi-k3", "released-config.json"))
	require.NoError(t, err)
	var kda int
	for i := 0; i < c.Layers; i++ {
		if !c.IsMLA(i) {
			kda++
		}
	}
	require.Equal(t, 69, kda)
	perPos := int64(kda) * recordBytes(c.KDAHeads, c.KDAHeadDim)
	assert.Equal(t, int64(20_375_424), perPos)
	assert.Equal(t, int64(183_378_816), int64(DefaultMaxDraft+1)*perPos)
	state := int64(kda) * int64(c.KDAHeads*c.KDAHeadDim*c.KDAHeadDim+3*c.KDAHeads*c.KDAHeadDim*(c.ConvK-1)) * 4
	assert.Equal(t, int64(464_633_856), state)
}

// TestSpecCeiling: the ceiling drafts what the drafter proposes and keeps
// exactly the tokens that come true. After the prompt 7 1 2 3 the reply
// 1 2 3 9 is made by the prompt's pass (1), one pass drafting 2 3 (both
// true, from the match of 1) and nothing more; plain decoding needs three
// passes.
func TestSpecCeiling(t *testing.T) {
	ids := []int{7, 1, 2, 3, 1, 2, 3, 9}
	costs := PassCosts{TrunkBytes: 10, ExpertBytes: 1, DiskBps: 1, Compute: []float64{0, 0}}
	c := SpecCeiling(ids, 4, 8, costs)
	assert.Equal(t, SpecSim{Tokens: 4, Passes: 1, Drafted: 2, Accepted: 2, Bytes: 13, Seconds: 13, Lengths: []int{0, 0, 1, 0, 0, 0, 0, 0, 0}}, c)
	off := SimulateSpec(ids, 4, SpecOff, 8, costs)
	assert.Equal(t, 3, off.Passes)
	assert.Equal(t, 33.0, off.Bytes)
	forced := SimulateSpec(ids, 4, Spec(8), 8, costs)
	assert.Equal(t, 1, forced.Passes, "forced drafting proposes the same two tokens here")
	assert.Equal(t, c.Bytes, forced.Bytes)
}

// TestGenerateOnPass: OnPass sees every decode pass of Generate once, in
// order, with the positions it fed (the chosen token and its draft), its
// read time inside its wall time and, with LayerTimes, a time for every
// bound layer; the layer timers are off once Generate returns, after a
// failed pass too.
func TestGenerateOnPass(t *testing.T) {
	name := "tiny-release"
	p := fixture.LoadExpect(t, name).Prompts[0]
	m := openCase(t, name, 0)
	plain := generateCase(t, m, 2, p.PromptIDs, GenOptions{MaxTokens: 12, Spec: SpecOff})
	e := m.NewEngine(2)
	defer e.Close()
	var got []PassStats
	res, err := e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: 12, Spec: 3, Trace: &GenTrace{LayerTimes: true,
		Propose: oracleDrafts(plain.res.FullIDs(), m.Cfg.VocabSize), OnPass: func(ps PassStats) { got = append(got, ps) }}})
	require.NoError(t, err)
	require.Equal(t, plain.res.Generated, res.Generated)
	require.Len(t, got, len(res.Passes))
	require.Greater(t, res.Stats.SpecDrafted, int64(0), "the passes verified drafts")
	for i, ps := range got {
		assert.Equal(t, res.Passes[i].Drafted+1, ps.Positions, "pass %d", i)
		assert.Equal(t, int64(1), ps.Stats.ForwardPasses, "pass %d", i)
		assert.Equal(t, ps.Positions, ps.Stats.Positions, "pass %d", i)
		assert.Positive(t, ps.Seconds, "pass %d", i)
		assert.LessOrEqual(t, ps.Stats.ReadBusySeconds, ps.Seconds, "pass %d: read time inside the wall time", i)
		require.Len(t, ps.LayerSeconds, m.Bound, "pass %d", i)
		require.Len(t, ps.ExpertSeconds, m.Bound, "pass %d", i)
		for li := range m.Bound {
			assert.Positive(t, ps.LayerSeconds[li], "pass %d layer %d", i, li)
			assert.LessOrEqual(t, ps.ExpertSeconds[li], ps.LayerSeconds[li], "pass %d layer %d", i, li)
		}
	}
	assert.Nil(t, e.layerSeconds)
	assert.Nil(t, e.expertSeconds)

	// without LayerTimes no layer is timed
	got = nil
	_, err = e.Generate(context.Background(), nil, p.PromptIDs, GenOptions{MaxTokens: 3, Spec: SpecOff, Trace: &GenTrace{OnPass: func(ps PassStats) { got = append(got, ps) }}})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Nil(t, got[0].LayerSeconds)

	// a pass cancelled inside its layers is not reported, and leaves the
	// timers off
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	armed := false
	mc, err := Open(fixture.ModelDir(name), Options{Budget: Budget{CacheBytes: 1 << 40}, Trace: func(layer, expert int) {
		if armed && layer == 2 {
			cancel()
		}
	}})
	require.NoError(t, err)
	defer mc.Close()
	ec := mc.NewEngine(2)
	defer ec.Close()
	got = nil
	_, err = ec.Generate(ctx, nil, p.PromptIDs, GenOptions{MaxTokens: 5, Spec: SpecOff, Trace: &GenTrace{LayerTimes: true, OnPass: func(ps PassStats) { got = append(got, ps) }},
		OnToken: func(Event) bool { armed = true; return false }})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, got)
	assert.Nil(t, ec.layerSeconds)
	assert.Nil(t, ec.expertSeconds)
}
