package cachesim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// run feeds keys to p and renders each access as H (hit) or M<victim>/M.
func run(p Policy, keys ...uint64) string {
	s := ""
	for _, k := range keys {
		ev := p.Access(k)
		switch {
		case ev.Hit:
			s += "H "
		case ev.Evicted:
			s += fmt.Sprintf("M%d ", ev.Victim)
		case ev.Admitted:
			s += "M "
		default:
			s += "X "
		}
	}
	return s
}

func TestLRUHandWorked(t *testing.T) {
	p := NewLRU(3, 0)
	got := run(p, 1, 2, 3, 1, 4, 2, 5, 1, 4)
	// 1 2 3 miss; 1 hit; 4 evicts 2 (LRU); 2 evicts 3; 5 evicts 1; 1 evicts 4; 4 evicts 2.
	if want := "M M M H M2 M3 M1 M4 M2 "; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if p.Len() != 3 || !p.Contains(5) || !p.Contains(1) || !p.Contains(4) || p.Contains(2) {
		t.Errorf("resident set wrong")
	}
	// The hook refuses 5 (the LRU key): 1 goes instead.
	p.SetEvictable(func(k uint64) bool { return k != 5 })
	if got := run(p, 9); got != "M1 " {
		t.Errorf("veto: %q", got)
	}
	p.SetEvictable(func(uint64) bool { return false })
	if got := run(p, 10); got != "X " || p.Contains(10) || p.Len() != 3 {
		t.Errorf("all refused: %q", got)
	}
	p.SetEvictable(nil)
	if !p.Remove(9) || p.Remove(9) || p.Len() != 2 {
		t.Error("Remove")
	}
	if got := run(p, 10); got != "M " {
		t.Errorf("after Remove a free slot is used: %q", got)
	}
	p.Reset()
	if p.Len() != 0 || run(p, 1, 1) != "M H " {
		t.Error("Reset")
	}
}

func TestS3FIFOHandWorked(t *testing.T) {
	// capacity 4, small target max(1, 0.4) = 1, ghost of 4.
	p := NewS3FIFO(4, 0)
	if p.SmallTarget() != 1 {
		t.Fatalf("small target %d", p.SmallTarget())
	}
	// 1,2,3,4 fill S. 1 hit (freq 1). 5: S head 1 has freq -> M; head 2
	// freq 0 -> evicted to G. 6: S = 3,4,5 -> 3 evicted. 2 (in G) -> M
	// directly, evicting 4 from S. 7: S = 5,6 -> 5 evicted.
	got := run(p, 1, 2, 3, 4, 1, 5, 6, 2, 7)
	if want := "M M M M H M2 M3 M4 M5 "; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	// Now S = 6,7 and M = 1(freq 0),2(freq 0). 1 hit -> freq 1. 8: S over
	// target -> 6 evicted. 9: 7 evicted. S = 8,9.
	if got := run(p, 1, 8, 9); got != "H M6 M7 " {
		t.Errorf("second phase %q", got)
	}
	// Drain S below target by removing 8 and 9: eviction must use M. M =
	// 1(freq 1), 2(freq 0): 1 is reinserted with freq 0, 2 is evicted.
	p.Remove(8)
	p.Remove(9)
	run(p, 10, 11) // fill the two free slots (S = 10, 11)
	p.Remove(10)
	p.Remove(11)
	run(p, 12, 13)
	p.Remove(12) // S = 13 (len 1 = target), M = 1, 2
	if got := run(p, 14); got != "M " {
		t.Errorf("free slot: %q", got)
	}
	// Full: S = 13,14 >= target: 13 evicted.
	if got := run(p, 15); got != "M13 " {
		t.Errorf("got %q", got)
	}
}

func TestS3FIFOVeto(t *testing.T) {
	p := NewS3FIFO(3, 0)
	run(p, 1, 2, 3)
	p.SetEvictable(func(k uint64) bool { return k != 1 })
	if got := run(p, 4); got != "M2 " {
		t.Errorf("refused head: %q", got)
	}
	p.SetEvictable(func(uint64) bool { return false })
	if got := run(p, 5); got != "X " || p.Len() != 3 || p.Contains(5) {
		t.Errorf("all refused: %q", got)
	}
	p.SetEvictable(nil)
	// The refused key went back to the tail of S (S = 3, 1, 4).
	if got := run(p, 5); got != "M3 " {
		t.Errorf("after the hook is cleared: %q", got)
	}
}

func TestPinnedLRU(t *testing.T) {
	p := NewPinnedLRU(4, 0, []uint64{7, 8, 7})
	if p.Pinned() != 2 {
		t.Fatalf("pinned %d", p.Pinned())
	}
	// Pinned keys miss once then always hit; LRU has 2 slots for the rest.
	got := run(p, 7, 1, 2, 3, 7, 8, 1, 8, 2)
	if want := "M M M M1 H M M2 H M3 "; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if p.Len() != 4 || !p.Contains(7) || !p.Contains(8) {
		t.Error("Len/Contains")
	}
	// At most capacity-1 keys pinned.
	if q := NewPinnedLRU(2, 0, []uint64{1, 2, 3}); q.Pinned() != 1 || run(q, 2, 3, 2) != "M M2 M3 " {
		t.Errorf("truncation: pinned %d", q.Pinned())
	}
}

func TestLFUHandWorked(t *testing.T) {
	p := NewLFU(2, 0)
	// 1 x3, 2 x1: 3 evicts 2 (fewest requests). 2 again: 3 has 1 request,
	// 1 has 3 -> 3 evicted. 4: 2 has 2, 1 has 3 -> 2 evicted. 2 (now 3
	// requests): 4 has 1 -> 4 evicted. 5: 1 and 2 tie at 3; 1 is less
	// recently used -> 1.
	got := run(p, 1, 1, 1, 2, 3, 2, 4, 2, 5)
	if want := "M H H M M2 M3 M2 M4 M1 "; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestLayerCycle(t *testing.T) {
	// 4 layers of 10 experts, capacity 3. Visiting layers 0,1,2,3 in order,
	// a miss at layer c evicts from c-1 first, then c-2, ...
	k := func(l, e int32) uint64 { return Key(l, e, 10) }
	p := NewLayerCycle(3, 4, 10)
	got := run(p, k(0, 1), k(1, 1), k(2, 1), k(3, 1), k(0, 1), k(1, 1), k(2, 1))
	// L3 evicts L2 (just finished). Next cycle: L0, L1 hit; L2 misses and
	// evicts from L1 (its predecessor) rather than L3, which comes later.
	if want := fmt.Sprintf("M M M M%d H H M%d ", k(2, 1), k(1, 1)); got != want {
		t.Errorf("got %q want %q", got, want)
	}
	// Wrap-around: a miss at layer 0 evicts from layer 3 first.
	q := NewLayerCycle(2, 4, 10)
	if got := run(q, k(3, 1), k(1, 1), k(0, 1)); got != fmt.Sprintf("M M M%d ", k(3, 1)) {
		t.Errorf("wrap: %q", got)
	}
	// Veto skips to the next layer in cycle order; own layer last.
	r := NewLayerCycle(2, 4, 10)
	run(r, k(2, 1), k(2, 2))
	r.SetEvictable(func(key uint64) bool { return key != k(2, 1) })
	if got := run(r, k(2, 3)); got != fmt.Sprintf("M%d ", k(2, 2)) {
		t.Errorf("own layer: %q", got)
	}
}

func TestLayerCycleRecency(t *testing.T) {
	k := func(l, e int32) uint64 { return Key(l, e, 10) }
	// Three layers, capacity 4. Token 1 routes L0{1} L1{1} L2{1}; token 2
	// L0{1} L1{2} L2{1}; token 3 starts with L0{2} on a full cache.
	seq := []uint64{k(0, 1), k(1, 1), k(2, 1), k(0, 1), k(1, 2), k(2, 1), k(0, 2)}
	// LAYER: L0's predecessor in the cycle is L2 -> L2{1} goes.
	if got := run(NewLayerCycle(4, 3, 10), seq...); got != fmt.Sprintf("M M M H M H M%d ", k(2, 1)) {
		t.Errorf("LAYER: %q", got)
	}
	// LAYER+R: L1{1} was not touched since L0's previous visit began (token
	// 2 did not route to it), so it is stale and goes first.
	if got := run(NewLayerCycleRecency(4, 3, 10), seq...); got != fmt.Sprintf("M M M H M H M%d ", k(1, 1)) {
		t.Errorf("LAYER+R: %q", got)
	}
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

// TestPoliciesAgainstReferences cross-checks the linked-list policies and
// the heap Belady against plain restatements on skewed random traces.
func TestPoliciesAgainstReferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n, space := 50+rng.IntN(400), 2+rng.IntN(60)
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = uint64(rng.IntN(space) * rng.IntN(space) / space) // skewed
		}
		c := 1 + rng.IntN(20)
		if got, want := Replay(NewLRU(c, 0), keys).Hits, refLRU(keys, c); got != want {
			t.Fatalf("trial %d LRU cap %d: %d hits, reference %d", trial, c, got, want)
		}
		if got, want := SimBelady(keys, space, c).Hits, refBelady(keys, c); got != want {
			t.Fatalf("trial %d Belady cap %d: %d hits, reference %d", trial, c, got, want)
		}
		if got, want := Replay(NewS3FIFO(c, 0), keys).Hits, refS3FIFO(keys, c); got != want {
			t.Fatalf("trial %d S3-FIFO cap %d: %d hits, reference %d", trial, c, got, want)
		}
		// Every online policy: never above Belady, Len within capacity,
		// deterministic across Reset.
		for _, p := range []Policy{NewLRU(c, 0), NewS3FIFO(c, 0), NewLFU(c, 0), NewPinnedLRU(c, 0, HotKeys(keys, c/2)),
			NewLayerCycle(c, 8, 8), NewLayerCycleRecency(c, 8, 8)} {
			a := Replay(p, keys)
			if p.Len() > c {
				t.Fatalf("%s holds %d > %d", p.Name(), p.Len(), c)
			}
			p.Reset()
			if b := Replay(p, keys); a != b {
				t.Fatalf("%s not deterministic across Reset: %+v vs %+v", p.Name(), a, b)
			}
			if opt := SimBelady(keys, space, c).Hits; a.Hits > opt {
				t.Fatalf("%s beats Belady: %d > %d", p.Name(), a.Hits, opt)
			}
		}
	}
}

// TestAccessDoesNotAllocate: once the key space is reserved, the online
// policies allocate nothing per request, as the engine's hot path needs.
func TestAccessDoesNotAllocate(t *testing.T) {
	tr := loadReal(t)
	keys := tr.Keys[:20000]
	ks := tr.KeySpace()
	for _, p := range []Policy{NewLRU(455, ks), NewS3FIFO(455, ks), NewLFU(455, ks),
		NewPinnedLRU(455, ks, HotKeys(keys, 200)), NewLayerCycle(455, tr.NLayers, tr.NExperts),
		NewLayerCycleRecency(455, tr.NLayers, tr.NExperts)} {
		p.SetEvictable(func(k uint64) bool { return k%97 != 0 })
		Replay(p, keys) // warm: fills the slots and the ghost
		i := 0
		allocs := testing.AllocsPerRun(5000, func() {
			p.Access(keys[i%len(keys)])
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per Access", p.Name(), allocs)
		}
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
	if SlotsForGB(8, ExpertBytes) != 455 || SlotsForGB(1450, ExpertBytes) != 82633 {
		t.Error("slots: GB must be 1e9 bytes, rounded down")
	}
	if K3.TokenRequests() != 1472 || K3.Tokens(100096) != 68 || K3.Tokens(5) != 1 {
		t.Error("tokens")
	}
	if _, err := LookupPolicy("nope"); err == nil {
		t.Error("unknown policy accepted")
	}
	for in, want := range map[string]string{"lru": "LRU", "s3fifo": "S3-FIFO", "pin": "PIN+LRU", "opt": "BELADY", "layer+r": "LAYER+R"} {
		if got, err := LookupPolicy(in); err != nil || got != want {
			t.Errorf("LookupPolicy(%q) = %q, %v", in, got, err)
		}
	}
}
