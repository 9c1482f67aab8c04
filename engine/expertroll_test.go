package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/engine/synth"
	"k3/storage/trunk"
)

// wideTopK is a generated checkpoint that routes each token to more
// experts (12) than the expert store reads at once (plan.ExpertQueueDepth,
// 8), as K3 does (16): its smallest cache, plan.MinExpertSlots, holds fewer
// experts than a token's top-k.
func wideTopK(t *testing.T) (model, tr string) {
	s := synth.Small()
	s.Experts, s.TopK, s.Seed = 32, 12, 7
	dir := t.TempDir()
	model, tr = filepath.Join(dir, "model"), filepath.Join(dir, "trunk")
	require.NoError(t, synth.Write(model, s))
	_, err := trunk.Pack(context.Background(), model, tr, trunk.Options{})
	require.NoError(t, err)
	return model, tr
}

// TestCacheSmallerThanTopKSameOutput: with an expert cache of 9 slots (the
// minimum, below the top-k of 12: a layer's experts run through the cache
// a slot at a time) the token ids and the logits are bit for bit those of
// a cache that holds every expert, resident and at ultra, prompt chunks
// (up to 32 distinct experts a layer) and decode steps alike. The C
// engine's minimum, top-k + 1, would have kept 13 slots.
func TestCacheSmallerThanTopKSameOutput(t *testing.T) {
	model, tr := wideTopK(t)
	prompt := []int{5, 77, 300, 12, 99, 41, 8, 150, 151, 152, 3, 400, 401, 2, 9, 10, 11, 12, 13, 14, 200}
	const gen = 6
	big := int64(1 << 40)
	ref := runBudget(t, model, Options{Budget: Budget{CacheBytes: big}}, 2, prompt, gen)
	require.Equal(t, 32*7, ref.plan.CacheSlots, "every expert of the 7 MoE layers")
	for _, c := range []struct {
		name string
		opt  Options
	}{
		{"smallest cache", Options{Budget: Budget{CacheBytes: 1}}},
		{"ultra", Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}}},
	} {
		r := runBudget(t, model, c.opt, 2, prompt, gen)
		assert.Equal(t, 9, r.plan.CacheSlots, c.name)
		assert.Equal(t, plan.MinExpertSlots(12), r.plan.CacheSlots, c.name)
		assert.Positive(t, r.stats.Expert.Evictions, c.name)
		assert.Greater(t, r.stats.Expert.Misses, ref.stats.Expert.Misses, c.name)
		assert.Equal(t, ref.ids, r.ids, c.name)
		requireSameBits(t, c.name+" logits", r.logits, ref.logits)
	}
}

// TestEachRollsThroughTheCache: Each over more experts than the store holds
// calls use once for each, in the store's slots, never holding more than
// its capacity pinned, and hands each expert the bytes a store holding
// every expert reads.
func TestEachRollsThroughTheCache(t *testing.T) {
	model, _ := wideTopK(t)
	small, err := Open(model, Options{Budget: Budget{CacheBytes: 1}})
	require.NoError(t, err)
	defer small.Close()
	large, err := Open(model, Options{Budget: Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer large.Close()
	s := small.experts.(*ExpertStore)
	require.Equal(t, 9, s.Slots(), "plan.MinExpertSlots(12): the C engine's top-k + 1 was 13")
	require.Equal(t, 9, s.MaxPinned())
	experts := []int{31, 0, 7, 12, 3, 30, 1, 2, 19, 20, 21, 5, 6, 8, 9, 10, 11, 13, 4, 14}
	li := 1
	want, err := large.experts.Acquire(li, experts)
	require.NoError(t, err)
	defer large.experts.Release(li, experts)
	used := make([]int, len(experts))
	most := 0
	require.NoError(t, s.Each(li, experts, func(i int, ex *Expert) {
		used[i]++
		most = max(most, s.pinnedSlots())
		assert.Equal(t, want[i].W1.Packed, ex.W1.Packed, "expert %d", experts[i])
		assert.Equal(t, want[i].W2.Scales, ex.W2.Scales, "expert %d", experts[i])
	}))
	assert.Equal(t, slices.Repeat([]int{1}, len(experts)), used)
	assert.Equal(t, 9, most, "the cache's slots, all in use")
	assert.Zero(t, s.pinnedSlots(), "every pin dropped")
	st := s.Stats()
	assert.Equal(t, int64(len(experts)), st.Misses)
	assert.Equal(t, int64(len(experts)-9), st.Evictions)
	assert.Equal(t, int64(len(experts))*s.ExpertBytes(), st.BytesRead)
}

// pinnedSlots counts the slots pinned now.
func (s *ExpertStore) pinnedSlots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sl := range s.slots {
		if sl.pins > 0 {
			n++
		}
	}
	return n
}

// TestEachRollingReadFails: a read that fails part-way through a rolling
// Each (the 13th of 20, after slots have been reused) returns the
// *ExpertError naming that expert, waits for the reads in flight and
// drops every pin, so the next
// Each over the same experts runs them all.
func TestEachRollingReadFails(t *testing.T) {
	model, _ := wideTopK(t)
	var reads, failAt atomic.Int64
	m, err := Open(model, Options{Budget: Budget{CacheBytes: 1}, ExpertReadAt: func(path string, off int64, dst []byte) error {
		if reads.Add(1) == failAt.Load() {
			return errors.New("input/output error")
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.ReadAt(dst, off)
		return err
	}})
	require.NoError(t, err)
	defer m.Close()
	s := m.experts.(*ExpertStore)
	experts := []int{31, 0, 7, 12, 3, 30, 1, 2, 19, 20, 21, 5, 6, 8, 9, 10, 11, 13, 4, 14}
	failAt.Store(13)
	used := 0
	err = s.Each(1, experts, func(int, *Expert) { used++ })
	var ee *ExpertError
	require.ErrorAs(t, err, &ee)
	assert.Contains(t, experts, ee.Expert)
	assert.ErrorContains(t, err, "input/output error")
	assert.Less(t, used, len(experts), "the failed expert is not used")
	assert.GreaterOrEqual(t, used, 4, "the 13th read is asked for once 4 experts have been used and their slots reused")
	assert.Zero(t, s.pinnedSlots())
	assert.Equal(t, int64(1), s.Stats().Failures)
	failAt.Store(0)
	used = 0
	require.NoError(t, s.Each(1, experts, func(int, *Expert) { used++ }))
	assert.Equal(t, len(experts), used)
	assert.Zero(t, s.pinnedSlots())
}

// TestEachUsePanics: a use that panics (k3 serve's handler recovers it)
// leaves no slot pinned, and the next Each runs through the same slots.
func TestEachUsePanics(t *testing.T) {
	model, _ := wideTopK(t)
	m, err := Open(model, Options{Budget: Budget{CacheBytes: 1}})
	require.NoError(t, err)
	defer m.Close()
	s := m.experts.(*ExpertStore)
	experts := []int{31, 0, 7, 12, 3, 30, 1, 2, 19, 20, 21, 5, 6, 8, 9, 10, 11, 13, 4, 14}
	used := 0
	assert.PanicsWithValue(t, "a bug in a kernel", func() {
		_ = s.Each(1, experts, func(int, *Expert) {
			if used++; used == 3 {
				panic("a bug in a kernel")
			}
		})
	})
	assert.Zero(t, s.pinnedSlots())
	used = 0
	require.NoError(t, s.Each(1, experts, func(_ int, ex *Expert) {
		require.NotNil(t, ex)
		used++
	}))
	assert.Equal(t, len(experts), used)
	assert.Zero(t, s.pinnedSlots())
}
