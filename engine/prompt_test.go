package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/kernels"
)

// memCache is a PromptCache of plain copies (the engine's tests cannot
// import engine/promptcache, which imports the engine).
type memCache struct {
	snaps map[string][]*State
	asked []int // the max of every Longest
}

func (c *memCache) Longest(part string, ids []int, max int) *State {
	c.asked = append(c.asked, max)
	var best *State
	for _, s := range c.snaps[part] {
		if s.Pos <= max && s.Pos <= len(ids) && slices.Equal(s.IDs, ids[:s.Pos]) && (best == nil || s.Pos > best.Pos) {
			best = s
		}
	}
	if best == nil {
		return nil
	}
	return best.Clone()
}

func (c *memCache) Keep(part string, s *State) {
	if c.snaps == nil {
		c.snaps = map[string][]*State{}
	}
	c.snaps[part] = append(c.snaps[part], s)
}

func (c *memCache) positions(part string) []int {
	var p []int
	for _, s := range c.snaps[part] {
		p = append(p, s.Pos)
	}
	return p
}

// fullStateBytes is the state file of s, the draft model's rows included.
func fullStateBytes(t *testing.T, m *Model, s *State) []byte {
	t.Helper()
	b, err := m.EncodeState(s)
	require.NoError(t, err)
	return b
}

// TestCheckpointsInsideChunks: the copies a feed keeps at marks inside
// its chunks (the last two of a chunk) and at their ends are, byte for
// byte (the draft model's context rows included), the states of feeding
// those positions alone.
func TestCheckpointsInsideChunks(t *testing.T) {
	for _, draft := range []bool{false, true} {
		var m *Model
		if draft {
			m = openWithDraft(t, "tiny-release", Options{Chunk: 16})
		} else {
			m = openCase(t, "tiny-release", 16)
		}
		ids := fixture.LoadExpect(t, "tiny-release").Prompts[1].FullIDs
		require.Greater(t, len(ids), 33)
		e := m.NewEngine(2)
		marks := []int{1, 5, 15, 16, 17, 31, 32, len(ids) - 1, len(ids)}
		s := m.NewState()
		s.SetMarks(marks)
		_, err := e.Feed(context.Background(), s, ids, false)
		require.NoError(t, err)
		caught := s.Caught()
		want := marks[1:] // 1, 5 and 15 are inside the first chunk: the last two are kept
		require.Len(t, caught, len(want))
		for i, c := range caught {
			require.Equal(t, want[i], c.Pos)
			alone := m.NewState()
			_, err := e.Feed(context.Background(), alone, ids[:c.Pos], false)
			require.NoError(t, err)
			require.Equal(t, fullStateBytes(t, m, alone), fullStateBytes(t, m, c), "draft %v: the copy at %d", draft, c.Pos)
			if draft {
				require.NotNil(t, c.draft, "the copy at %d has the draft rows", c.Pos)
			}
		}
		e.Close()
	}
}

// resumeRun generates over prompt twice with one cache: a shorter prompt
// first (that fills the cache), then prompt, which resumes. It returns the
// second run and the cache.
func resumeRun(t *testing.T, e *Engine, first, prompt []int, gen int) (*GenResult, *memCache) {
	t.Helper()
	c := &memCache{}
	_, err := e.Generate(context.Background(), nil, first, GenOptions{MaxTokens: 2, Cache: &CacheUse{Cache: c, Every: 5}})
	require.NoError(t, err)
	res, err := e.Generate(context.Background(), nil, prompt, GenOptions{MaxTokens: gen, Complete: true, Cache: &CacheUse{Cache: c, Every: 5}})
	require.NoError(t, err)
	return res, c
}

// TestResumeEqualsScratch: a prompt resumed from the cache's longest
// snapshot gives the tokens, the first logits and the final state, bit
// for bit, of reading it from the start: at several chunk lengths, thread
// counts and kernel levels, with and without a draft model, for a prompt
// that extends the first, one that is shorter, and one that only shares
// its start.
func TestResumeEqualsScratch(t *testing.T) {
	ex := fixture.LoadExpect(t, "tiny-release")
	long := ex.Prompts[1].FullIDs
	levels := []kernels.Level{kernels.LevelPortable}
	if b := kernels.BestLevel(); b != kernels.LevelPortable {
		levels = append(levels, b)
	}
	const gen = 5
	for _, draft := range []bool{false, true} {
		for _, chunk := range []int{1, 7, 16} {
			var m *Model
			if draft {
				m = openWithDraft(t, "tiny-release", Options{Chunk: chunk})
			} else {
				m = openCase(t, "tiny-release", chunk)
			}
			for _, l := range levels {
				prev := kernels.SetLevel(l)
				for _, threads := range []int{1, 2} {
					e := m.NewEngine(threads)
					name := fmt.Sprintf("draft %v chunk %d %v threads %d", draft, chunk, l, threads)
					cases := []struct {
						what          string
						first, prompt []int
						reused        int
					}{
						{"longer", long[:20], long, 20},
						{"shorter", long[:30], long[:17], 15},
						{"shares the start", append(slices.Clone(long[:12]), 3, 4, 5), append(slices.Clone(long[:12]), 9, 9, 9, 9), 10},
					}
					for _, c := range cases {
						want, err := e.Generate(context.Background(), nil, c.prompt, GenOptions{MaxTokens: gen, Complete: true})
						require.NoError(t, err)
						got, _ := resumeRun(t, e, c.first, c.prompt, gen)
						require.Equal(t, c.reused, got.Reused, "%s %s", name, c.what)
						require.Equal(t, want.Generated, got.Generated, "%s %s", name, c.what)
						requireSameBits(t, name+" "+c.what+" first logits", want.FirstLogits, got.FirstLogits)
						require.Equal(t, stateBytes(t, m, want.State), stateBytes(t, m, got.State), "%s %s: the state", name, c.what)
					}
					e.Close()
				}
				kernels.SetLevel(prev)
			}
		}
	}
}

// TestResumeReportsReused: the prefill events of a resumed prompt count
// the whole prompt and say how much came from the cache; the cache keeps
// the marks, every Every positions, and the prompt's end and the position
// before it; a cache partition never sees another's snapshots.
func TestResumeReportsReused(t *testing.T) {
	m := openCase(t, "tiny-release", 16)
	ids := fixture.LoadExpect(t, "tiny-release").Prompts[1].FullIDs
	n := len(ids)
	e := m.NewEngine(2)
	defer e.Close()
	c := &memCache{}
	use := &CacheUse{Cache: c, Partition: "a", Marks: []int{3}, Every: 10}
	_, err := e.Generate(context.Background(), nil, ids[:25], GenOptions{Cache: use})
	require.NoError(t, err)
	assert.Equal(t, []int{3, 10, 20, 24, 25}, c.positions("a"))

	var last Event
	res, err := e.Generate(context.Background(), nil, ids, GenOptions{MaxTokens: 1, Cache: &CacheUse{Cache: c, Partition: "a", Every: -1},
		OnEvent: func(ev Event) {
			if ev.Kind == EventPrefill {
				last = ev
			}
		}})
	require.NoError(t, err)
	assert.Equal(t, 25, res.Reused)
	assert.Equal(t, Event{Kind: EventPrefill, Done: n, Total: n, Reused: 25}, Event{Kind: last.Kind, Done: last.Done, Total: last.Total, Reused: last.Reused})

	other, err := e.Generate(context.Background(), nil, ids, GenOptions{MaxTokens: 1, Cache: &CacheUse{Cache: c, Partition: "b"}})
	require.NoError(t, err)
	assert.Zero(t, other.Reused, "partition b reuses nothing of a's")
}

// TestResumeKeepsTheDraftRows: a run with a draft model neither takes a
// snapshot made without it (the state would have lost its draft context
// for the rest of the conversation: no drafts) nor leaves its own to runs
// without it; between runs with it the snapshots carry the draft rows.
func TestResumeKeepsTheDraftRows(t *testing.T) {
	ids := fixture.LoadExpect(t, "tiny-release").Prompts[1].FullIDs
	plain := openCase(t, "tiny-release", 16)
	drafting := openWithDraft(t, "tiny-release", Options{Chunk: 16})
	ep, ed := plain.NewEngine(1), drafting.NewEngine(1)
	defer ep.Close()
	defer ed.Close()
	c := &memCache{}
	use := func() *CacheUse { return &CacheUse{Cache: c, Partition: "a", Every: 5} }
	_, err := ep.Generate(context.Background(), nil, ids[:20], GenOptions{Cache: use()})
	require.NoError(t, err)
	first, err := ed.Generate(context.Background(), nil, ids, GenOptions{MaxTokens: 1, Cache: use()})
	require.NoError(t, err)
	assert.Zero(t, first.Reused, "the snapshots made without the draft model are not taken")
	again, err := ed.Generate(context.Background(), nil, ids, GenOptions{MaxTokens: 1, Cache: use()})
	require.NoError(t, err)
	assert.Equal(t, len(ids)-1, again.Reused, "the draft run's own snapshots are")
	require.NotNil(t, again.State.draft)
	assert.Equal(t, again.State.Pos, again.State.draft.n, "with the draft rows of every position")
	back, err := ep.Generate(context.Background(), nil, ids, GenOptions{MaxTokens: 1, Cache: use()})
	require.NoError(t, err)
	assert.Equal(t, 20, back.Reused, "a run without the draft model takes its own snapshots only")
}

// TestMessageMarks: the positions after each end-of-message id.
func TestMessageMarks(t *testing.T) {
	assert.Equal(t, []int{12, 15, 16}, MessageMarks([]int{1, 9, 2, 3, 9, 4}, 10, []int{9, 4}))
}

// TestResumeAtEveryBudget: resumed from the cache at a streamed trunk with
// a one-slot ring, at the smallest budget, or resident, a prompt gives the
// tokens and logits of reading it from the start resident.
func TestResumeAtEveryBudget(t *testing.T) {
	model, tr := budgetCheckpoint(t)
	prompt := []int{5, 77, 300, 12, 999, 41, 8, 150, 151, 152, 3, 600, 601, 2, 9, 10, 11, 12, 13, 14, 700}
	big := int64(1 << 40)
	ref := runBudget(t, model, Options{Budget: Budget{CacheBytes: big}}, 2, prompt, 4)
	for _, o := range []Options{
		{Budget: Budget{CacheBytes: big}},
		{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: big}},
		{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}},
	} {
		o.Chunk, o.Positions = 16, len(prompt)+4
		m, err := Open(model, o)
		require.NoError(t, err)
		e := m.NewEngine(2)
		got, c := resumeRun(t, e, prompt[:9], prompt, 4)
		e.Close()
		m.Close()
		assert.Equal(t, 9, got.Reused)
		assert.NotEmpty(t, c.asked)
		require.Equal(t, ref.ids, got.Generated[:4], "trunk %q", o.TrunkDir)
		requireSameBits(t, "first logits", ref.logits, got.FirstLogits)
	}
}
