package expertcache

import (
	"encoding/binary"
	"fmt"
	"k3/internal/fixture"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run feeds keys to p and renders each access as H (hit) or M<victim>/M,
// or X when the miss was not admitted.
func run(p Policy, keys ...uint64) string {
	return fixture.AccessTrace(keys, func(k uint64) (bool, bool, bool, uint64) {
		ev := p.Access(k)
		return ev.Hit, ev.Admitted, ev.Evicted, ev.Victim
	})
}

// hits replays keys through p and counts the hits.
func hits(p Policy, keys []uint64) int {
	n := 0
	for _, k := range keys {
		if p.Access(k).Hit {
			n++
		}
	}
	return n
}

var realTrace = fixture.Path("seed-v1/expert_trace.bin")

// realKeys is the real (full-recompute) K3 trace as dense keys
// layer*nExperts+expert; layers 1..92 of 93, experts 0..895.
func realKeys(t testing.TB) (keys []uint64, nLayers, nExperts int) {
	t.Helper()
	b, err := os.ReadFile(realTrace)
	require.NoError(t, err)
	require.Zero(t, len(b)%8, "trace length")
	nLayers, nExperts = 93, 896
	keys = make([]uint64, len(b)/8)
	for i := range keys {
		l := int32(binary.LittleEndian.Uint32(b[8*i:]))
		e := int32(binary.LittleEndian.Uint32(b[8*i+4:]))
		require.True(t, l >= 0 && int(l) < nLayers && e >= 0 && int(e) < nExperts, "request %d: (%d, %d)", i, l, e)
		keys[i] = Key(l, e, int32(nExperts))
	}
	return keys, nLayers, nExperts
}

func TestLRUHandWorked(t *testing.T) {
	p := NewLRU(3, 0)
	// 1 2 3 miss; 1 hit; 4 evicts 2 (LRU); 2 evicts 3; 5 evicts 1; 1 evicts 4; 4 evicts 2.
	assert.Equal(t, "M M M H M2 M3 M1 M4 M2 ", run(p, 1, 2, 3, 1, 4, 2, 5, 1, 4))
	assert.Equal(t, 3, p.Len())
	assert.True(t, p.Contains(5) && p.Contains(1) && p.Contains(4) && !p.Contains(2), "resident set")
	// The hook refuses 5 (the LRU key): 1 goes instead.
	p.SetEvictable(func(k uint64) bool { return k != 5 })
	assert.Equal(t, "M1 ", run(p, 9), "veto")
	p.SetEvictable(func(uint64) bool { return false })
	assert.Equal(t, "X ", run(p, 10), "all refused")
	assert.False(t, p.Contains(10))
	assert.Equal(t, 3, p.Len())
	p.SetEvictable(nil)
	assert.True(t, p.Remove(9))
	assert.False(t, p.Remove(9))
	assert.Equal(t, 2, p.Len())
	assert.Equal(t, "M ", run(p, 10), "after Remove a free slot is used")
	p.Reset()
	assert.Zero(t, p.Len())
	assert.Equal(t, "M H ", run(p, 1, 1), "after Reset")
}

func TestS3FIFOHandWorked(t *testing.T) {
	// capacity 4, small target max(1, 0.4) = 1, ghost of 4.
	p := NewS3FIFO(4, 0)
	require.Equal(t, 1, p.SmallTarget())
	// 1,2,3,4 fill S. 1 hit (freq 1). 5: S head 1 has freq -> M; head 2
	// freq 0 -> evicted to G. 6: S = 3,4,5 -> 3 evicted. 2 (in G) -> M
	// directly, evicting 4 from S. 7: S = 5,6 -> 5 evicted.
	assert.Equal(t, "M M M M H M2 M3 M4 M5 ", run(p, 1, 2, 3, 4, 1, 5, 6, 2, 7))
	// Now S = 6,7 and M = 1(freq 0),2(freq 0). 1 hit -> freq 1. 8: S over
	// target -> 6 evicted. 9: 7 evicted. S = 8,9.
	assert.Equal(t, "H M6 M7 ", run(p, 1, 8, 9), "second phase")
	// Drain S below target by removing 8 and 9: eviction must use M. M =
	// 1(freq 1), 2(freq 0): 1 is reinserted with freq 0, 2 is evicted.
	p.Remove(8)
	p.Remove(9)
	run(p, 10, 11) // fill the two free slots (S = 10, 11)
	p.Remove(10)
	p.Remove(11)
	run(p, 12, 13)
	p.Remove(12) // S = 13 (len 1 = target), M = 1, 2
	assert.Equal(t, "M ", run(p, 14), "free slot")
	// Full: S = 13,14 >= target: 13 evicted.
	assert.Equal(t, "M13 ", run(p, 15))
}

func TestS3FIFOVeto(t *testing.T) {
	p := NewS3FIFO(3, 0)
	run(p, 1, 2, 3)
	p.SetEvictable(func(k uint64) bool { return k != 1 })
	assert.Equal(t, "M2 ", run(p, 4), "refused head")
	p.SetEvictable(func(uint64) bool { return false })
	assert.Equal(t, "X ", run(p, 5), "all refused")
	assert.Equal(t, 3, p.Len())
	assert.False(t, p.Contains(5))
	p.SetEvictable(nil)
	// The refused key went back to the tail of S (S = 3, 1, 4).
	assert.Equal(t, "M3 ", run(p, 5), "after the hook is cleared")
}

func TestLayerCycle(t *testing.T) {
	// 4 layers of 10 experts, capacity 3. Visiting layers 0,1,2,3 in order,
	// a miss at layer c evicts from c-1 first, then c-2, ...
	k := func(l, e int32) uint64 { return Key(l, e, 10) }
	p := NewLayerCycle(3, 4, 10)
	// L3 evicts L2 (just finished). Next cycle: L0, L1 hit; L2 misses and
	// evicts from L1 (its predecessor) rather than L3, which comes later.
	assert.Equal(t, fmt.Sprintf("M M M M%d H H M%d ", k(2, 1), k(1, 1)),
		run(p, k(0, 1), k(1, 1), k(2, 1), k(3, 1), k(0, 1), k(1, 1), k(2, 1)))
	// Wrap-around: a miss at layer 0 evicts from layer 3 first.
	q := NewLayerCycle(2, 4, 10)
	assert.Equal(t, fmt.Sprintf("M M M%d ", k(3, 1)), run(q, k(3, 1), k(1, 1), k(0, 1)), "wrap")
	// Veto skips to the next layer in cycle order; own layer last.
	r := NewLayerCycle(2, 4, 10)
	run(r, k(2, 1), k(2, 2))
	r.SetEvictable(func(key uint64) bool { return key != k(2, 1) })
	assert.Equal(t, fmt.Sprintf("M%d ", k(2, 2)), run(r, k(2, 3)), "own layer")
	assert.Panics(t, func() { r.Access(k(4, 0)) }, "a key beyond the last layer")
}

func TestLayerCycleRecency(t *testing.T) {
	k := func(l, e int32) uint64 { return Key(l, e, 10) }
	// Three layers, capacity 4. Token 1 routes L0{1} L1{1} L2{1}; token 2
	// L0{1} L1{2} L2{1}; token 3 starts with L0{2} on a full cache.
	seq := []uint64{k(0, 1), k(1, 1), k(2, 1), k(0, 1), k(1, 2), k(2, 1), k(0, 2)}
	// LAYER: L0's predecessor in the cycle is L2 -> L2{1} goes.
	assert.Equal(t, fmt.Sprintf("M M M H M H M%d ", k(2, 1)), run(NewLayerCycle(4, 3, 10), seq...), "layer")
	// LAYER+R: L1{1} was not touched since L0's previous visit began (token
	// 2 did not route to it), so it is stale and goes first.
	assert.Equal(t, fmt.Sprintf("M M M H M H M%d ", k(1, 1)), run(NewLayerCycleRecency(4, 3, 10), seq...), "layer+r")
}

// refLRU is a slice-based LRU for cross-checking.
func refLRU(keys []uint64, c int) int {
	var res []uint64
	hits := 0
	for _, k := range keys {
		if i := slices.Index(res, k); i >= 0 {
			hits++
			res = append(slices.Delete(res, i, i+1), k)
			continue
		}
		if len(res) == c {
			res = res[1:]
		}
		res = append(res, k)
	}
	return hits
}

// refS3FIFO restates the S3-FIFO rules over plain slices. The ghost keeps
// c entries, stale ones (keys readmitted since) included, like a ring.
func refS3FIFO(keys []uint64, c int) int {
	type ghostEntry struct {
		key uint64
		id  int
	}
	target := max(1, int(float64(c)*0.1))
	var S, M []uint64
	var G []ghostEntry
	mark := map[uint64]int{} // key -> id of its live ghost entry
	freq := map[uint64]int{}
	hits := 0
	for n, k := range keys {
		if slices.Contains(S, k) || slices.Contains(M, k) {
			hits++
			freq[k] = min(freq[k]+1, 3)
			continue
		}
		for len(S)+len(M) >= c {
			if len(S) > 0 && (len(S) >= target || len(M) == 0) {
				v := S[0]
				S = S[1:]
				if freq[v] > 0 {
					freq[v] = 0
					M = append(M, v)
					continue
				}
				if len(G) == c {
					if old := G[0]; mark[old.key] == old.id {
						delete(mark, old.key)
					}
					G = G[1:]
				}
				G = append(G, ghostEntry{v, n + 1})
				mark[v] = n + 1
				break
			}
			v := M[0]
			M = M[1:]
			if freq[v] > 0 {
				freq[v]--
				M = append(M, v)
				continue
			}
			break
		}
		freq[k] = 0
		if _, ok := mark[k]; ok {
			delete(mark, k)
			M = append(M, k)
		} else {
			S = append(S, k)
		}
	}
	return hits
}

// TestPoliciesAgainstReferences cross-checks the linked-list policies
// against plain restatements on skewed random traces, and checks every
// policy keeps within its capacity and is deterministic across Reset.
func TestPoliciesAgainstReferences(t *testing.T) {
	fixture.SkewedTraces(func(trial int, keys []uint64, _, c int) {
		require.Equal(t, refLRU(keys, c), hits(NewLRU(c, 0), keys), "trial %d LRU cap %d", trial, c)
		require.Equal(t, refS3FIFO(keys, c), hits(NewS3FIFO(c, 0), keys), "trial %d S3-FIFO cap %d", trial, c)
		for _, name := range Names() {
			p, err := New(name, c, 8, 8)
			require.NoError(t, err)
			a := hits(p, keys)
			require.LessOrEqual(t, p.Len(), c, "%s holds more than its capacity", name)
			p.Reset()
			require.Zero(t, p.Len(), "%s after Reset", name)
			require.Equal(t, a, hits(p, keys), "%s not deterministic across Reset", name)
		}
	})
}

// TestAccessDoesNotAllocate: once the key space is reserved, the policies
// allocate nothing per request, as the engine's hot path needs.
func TestAccessDoesNotAllocate(t *testing.T) {
	keys, nLayers, nExperts := realKeys(t)
	keys = keys[:20000]
	for _, name := range Names() {
		p, err := New(name, 455, nLayers, nExperts)
		require.NoError(t, err)
		p.SetEvictable(func(k uint64) bool { return k%97 != 0 })
		hits(p, keys) // warm: fills the slots and the ghost
		i := 0
		allocs := testing.AllocsPerRun(5000, func() {
			p.Access(keys[i%len(keys)])
			i++
		})
		assert.Zero(t, allocs, "%s: allocations per Access", name)
	}
}

// TestS3FIFOMatchesReferenceTable reproduces the S3-FIFO table in the
// docstring of the C project's later sim_cache.py tool (not shipped with
// the fixtures; quoted from the spec's source) at 4, 16, 32, 64 and 128 GB
// (cap/WS 0.15 .. 4.96), with small shares of 10% and 50%. It matches to the
// printed precision only with that tool's lossy ghost (lossyGhost); the exact
// ghost this package uses gives 73.65% instead of 73.73% at 128 GB/10% and
// is identical elsewhere.
func TestS3FIFOMatchesReferenceTable(t *testing.T) {
	keys, nLayers, nExperts := realKeys(t)
	const expertBytes = 17_547_264 // one K3 expert; GB = 1e9 bytes
	pct := func(p Policy) string { return fmt.Sprintf("%.2f", 100*float64(hits(p, keys))/float64(len(keys))) }
	ref := []struct {
		gb              float64
		ten, half, exac string
	}{
		{4, "32.92", "36.21", "32.92"},
		{16, "36.11", "36.24", "36.11"},
		{32, "42.68", "36.24", "42.68"},
		{64, "49.97", "38.37", "49.97"},
		{128, "73.73", "69.68", "73.65"},
	}
	for _, r := range ref {
		c := int(r.gb * 1e9 / expertBytes)
		for _, v := range []struct {
			frac float64
			want string
		}{{0.10, r.ten}, {0.50, r.half}} {
			p := NewS3FIFOWith(c, nLayers*nExperts, v.frac, c)
			p.lossyGhost = true
			assert.Equal(t, v.want, pct(p), "%v GB (%d slots) small %.0f%% lossy ghost", r.gb, c, 100*v.frac)
		}
		assert.Equal(t, r.exac, pct(NewS3FIFO(c, nLayers*nExperts)), "%v GB S3-FIFO exact ghost", r.gb)
	}
}
