package cachesim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/expertcache"
	"k3/internal/fixture"
	"k3/storage/config"
)

// run feeds keys to p and renders each access as H (hit) or M<victim>/M,
// or X when the miss was not admitted.
func run(p expertcache.Policy, keys ...uint64) string {
	return fixture.AccessTrace(keys, func(k uint64) (bool, bool, bool, uint64) {
		ev := p.Access(k)
		return ev.Hit, ev.Admitted, ev.Evicted, ev.Victim
	})
}

func TestPinnedLRU(t *testing.T) {
	p := NewPinnedLRU(4, 0, []uint64{7, 8, 7})
	require.Equal(t, 2, p.Pinned())
	// Pinned keys miss once then always hit; LRU has 2 slots for the rest.
	assert.Equal(t, "M M M M1 H M M2 H M3 ", run(p, 7, 1, 2, 3, 7, 8, 1, 8, 2))
	assert.Equal(t, 4, p.Len())
	assert.True(t, p.Contains(7) && p.Contains(8))
	// At most capacity-1 keys pinned.
	q := NewPinnedLRU(2, 0, []uint64{1, 2, 3})
	assert.Equal(t, 1, q.Pinned(), "truncation")
	assert.Equal(t, "M M2 M3 ", run(q, 2, 3, 2), "truncation")
}

func TestLFUHandWorked(t *testing.T) {
	p := NewLFU(2, 0)
	// 1 x3, 2 x1: 3 evicts 2 (fewest requests). 2 again: 3 has 1 request,
	// 1 has 3 -> 3 evicted. 4: 2 has 2, 1 has 3 -> 2 evicted. 2 (now 3
	// requests): 4 has 1 -> 4 evicted. 5: 1 and 2 tie at 3; 1 is less
	// recently used -> 1.
	assert.Equal(t, "M H H M M2 M3 M2 M4 M1 ", run(p, 1, 1, 1, 2, 3, 2, 4, 2, 5))
	// Resident: 2 (4 requests), 5 (1). The hook refuses 5: 2 goes instead;
	// refusing everything admits nothing.
	p.SetEvictable(func(k uint64) bool { return k != 5 })
	assert.Equal(t, "M2 ", run(p, 6), "veto")
	p.SetEvictable(func(uint64) bool { return false })
	assert.Equal(t, "X ", run(p, 7), "all refused")
	assert.Equal(t, 2, p.Len())
	assert.True(t, p.Contains(5) && p.Contains(6) && !p.Contains(7))
	p.SetEvictable(nil)
	assert.True(t, p.Remove(5))
	assert.False(t, p.Remove(5))
	assert.False(t, p.Remove(1<<20), "a key beyond the state")
	assert.Equal(t, "M ", run(p, 8), "after Remove a free slot is used")
	// 6 has 1 request, 8 has 1 and is more recent: 6 goes; counts survive
	// eviction, so 1 (3 earlier requests, evicted) is now worth keeping.
	assert.Equal(t, "M6 ", run(p, 1))
	assert.Equal(t, "M8 ", run(p, 9))
	p.Reset()
	assert.Zero(t, p.Len())
	assert.Equal(t, "M H ", run(p, 1, 1), "after Reset")
}

// refBelady is an O(n*c) scan Belady with the same bypass rule.
func refBelady(keys []uint64, c int) int {
	next := func(i int, k uint64) int {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] == k {
				return j
			}
		}
		return len(keys)
	}
	var res []uint64
	hits := 0
	for i, k := range keys {
		if slices.Contains(res, k) {
			hits++
			continue
		}
		if len(res) == c {
			far, at := -1, -1
			for j, r := range res {
				if n := next(i, r); n > far {
					far, at = n, j
				}
			}
			if far < next(i, k) {
				continue
			}
			res = slices.Delete(res, at, at+1)
		}
		res = append(res, k)
	}
	return hits
}

// TestPoliciesAgainstReferences cross-checks the heap Belady against a plain
// restatement on skewed random traces, and every online policy against it
// (the engine's are cross-checked against references in expertcache).
func TestPoliciesAgainstReferences(t *testing.T) {
	fixture.SkewedTraces(func(trial int, keys []uint64, space, c int) {
		opt := SimBelady(keys, space, c).Hits
		require.Equal(t, refBelady(keys, c), opt, "trial %d Belady cap %d", trial, c)
		// Every online policy: never above Belady, Len within capacity,
		// deterministic across Reset.
		for _, p := range []expertcache.Policy{expertcache.NewLRU(c, 0), expertcache.NewS3FIFO(c, 0), NewLFU(c, 0),
			NewPinnedLRU(c, 0, HotKeys(keys, c/2)), expertcache.NewLayerCycle(c, 8, 8), expertcache.NewLayerCycleRecency(c, 8, 8)} {
			a := Replay(p, keys)
			require.LessOrEqual(t, p.Len(), c, "%s holds more than its capacity", p.Name())
			p.Reset()
			require.Equal(t, a, Replay(p, keys), "%s not deterministic across Reset", p.Name())
			require.LessOrEqual(t, a.Hits, opt, "%s beats Belady", p.Name())
		}
	})
}

// TestAccessDoesNotAllocate: once the key space is reserved, the
// simulator's own online policies allocate nothing per request either.
func TestAccessDoesNotAllocate(t *testing.T) {
	tr := loadReal(t)
	keys := tr.Keys[:20000]
	ks := tr.KeySpace()
	for _, p := range []expertcache.Policy{NewLFU(455, ks), NewPinnedLRU(455, ks, HotKeys(keys, 200))} {
		p.SetEvictable(func(k uint64) bool { return k%97 != 0 })
		Replay(p, keys) // warm: fills the slots
		i := 0
		allocs := testing.AllocsPerRun(5000, func() {
			p.Access(keys[i%len(keys)])
			i++
		})
		assert.Zero(t, allocs, "%s: allocations per Access", p.Name())
	}
}

func TestIncrementalFromRecompute(t *testing.T) {
	// Two layers, top-2: step 0 has one position, step 1 two.
	rec := []Request{{1, 5}, {1, 6}, {2, 7}, {2, 8}, {1, 5}, {1, 6}, {1, 9}, {1, 5}, {2, 7}, {2, 8}, {2, 1}, {2, 2}}
	inc, err := IncrementalFromRecompute(rec, 2)
	want := []Request{{1, 5}, {1, 6}, {2, 7}, {2, 8}, {1, 9}, {1, 5}, {2, 1}, {2, 2}}
	if err != nil || !slices.Equal(inc, want) {
		t.Errorf("got %v %v, want %v", inc, err, want)
	}
	bad := slices.Clone(rec)
	bad[5] = Request{1, 3}
	if _, err := IncrementalFromRecompute(bad, 2); err == nil {
		t.Error("accepted a step that does not repeat the prefix")
	}
	if _, err := IncrementalFromRecompute(rec[:3], 2); err == nil {
		t.Error("accepted a run that is not a multiple of top-k")
	}
}

func TestSlotsAndModel(t *testing.T) {
	assert.Equal(t, 455, SlotsForGB(8, K3.ExpertBytes), "GB is 1e9 bytes, rounded down")
	assert.Equal(t, 82633, SlotsForGB(1450, K3.ExpertBytes))
	assert.Equal(t, 1472, K3.TokenRequests())
	assert.Equal(t, 68, K3.Tokens(100096))
	assert.Equal(t, 1, K3.Tokens(5))
}

// TestModelFromConfig: the K3 default is what the released config gives,
// and another config gives its own numbers.
func TestModelFromConfig(t *testing.T) {
	c, err := config.Load(fixture.Path("kimi-k3/released-config.json"))
	require.NoError(t, err)
	assert.Equal(t, K3, ModelFromConfig(c, DiskMBps))
	assert.Equal(t, Model{ExpertBytes: 17_547_264, MoELayers: 92, Experts: 896, TopK: 16, DiskMBps: 1234}, K3)

	tiny, err := config.Load(fixture.Path("models/tiny-release/config.json"))
	require.NoError(t, err)
	m := ModelFromConfig(tiny, 500)
	l, i := int64(tiny.Latent), int64(tiny.MoEInter)
	assert.Equal(t, 3*i*l/2+3*i*l/32, m.ExpertBytes, "three MXFP4 projections with a scale byte per 32")
	assert.Equal(t, tiny.Layers-tiny.FirstKDense, m.MoELayers)
	assert.Equal(t, tiny.Experts, m.Experts)
	assert.Equal(t, tiny.TopK, m.TopK)
	assert.Equal(t, 500.0, m.DiskMBps)
	assert.NotEqual(t, K3, m)
}

// TestPolicyNames: one set of names, the registry's for the engine's
// policies, and Simulate runs those through the registry.
func TestPolicyNames(t *testing.T) {
	require.Equal(t, []string{"lru", "s3fifo", "s3fifo-ws", "lfu", "layer", "layer+r", "belady", "pin+lru"}, Policies)
	for _, n := range expertcache.Names() {
		assert.Contains(t, Policies, n, "every engine policy is a simulator column")
	}
	for _, p := range Policies {
		for _, in := range []string{p, strings.ToUpper(p)} {
			got, err := LookupPolicy(in)
			require.NoError(t, err, in)
			assert.Equal(t, p, got)
		}
	}
	for _, old := range []string{"S3-FIFO", "S3-FIFO-WS", "pin", "opt", "nope", " lru"} {
		_, err := LookupPolicy(old)
		assert.EqualError(t, err, fmt.Sprintf("unknown cache policy %q (known: lru, s3fifo, s3fifo-ws, lfu, layer, layer+r, belady, pin+lru)", old))
	}
	assert.True(t, Offline(PolicyBelady) && Offline(PolicyPinnedLRU))
	assert.False(t, Offline(expertcache.NameLRU) || Offline(PolicyLFU))

	tr := NewTrace([]Request{{0, 1}, {1, 2}, {0, 1}, {2, 3}, {1, 2}, {0, 1}})
	for _, p := range Policies {
		st, err := Simulate(tr, K3, strings.ToUpper(p), 2)
		require.NoError(t, err, p)
		assert.Equal(t, p, st.Policy, "Stats name the policy as the registry does")
		assert.Equal(t, 6, st.Hits+st.Misses)
		if newPolicy, ok := expertcache.Lookup(p); ok {
			assert.Equal(t, Replay(newPolicy(2, tr.NLayers, tr.NExperts), tr.Keys).Hits, st.Hits, p)
		}
	}
	_, err := Simulate(tr, K3, "lru", 0)
	assert.Error(t, err, "capacity 0")
}
