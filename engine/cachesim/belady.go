package cachesim

// NextUse returns, for each position i of keys, the position of the next
// request for the same key, or len(keys) if there is none. keySpace must
// exceed every key.
func NextUse(keys []uint64, keySpace int) []int32 {
	n := len(keys)
	next := make([]int32, n)
	last := make([]int32, keySpace)
	for i := range last {
		last[i] = int32(n)
	}
	for i := n - 1; i >= 0; i-- {
		k := keys[i]
		next[i] = last[k]
		last[k] = int32(i)
	}
	return next
}

// beladyEntry is a (next use, key) pair in the max-heap.
type beladyEntry struct {
	next int32
	key  uint64
}

// SimBelady replays keys under Belady's optimal policy with bypass: on a
// miss with a full cache, the resident key whose next use is farthest is
// evicted, unless the requested key's own next use is farther still, in
// which case the request is served without being cached (a miss that
// evicts nothing). This is the optimum for the hit count and matches the C
// tool. O(n log n): next uses are precomputed and the victim comes from a
// lazily pruned max-heap.
func SimBelady(keys []uint64, keySpace, capacity int) Stats {
	st := Stats{Policy: PolicyBelady, Capacity: capacity, Requests: len(keys)}
	if capacity < 1 {
		st.Misses = len(keys)
		return st
	}
	next := NextUse(keys, keySpace)
	resident := make([]int32, keySpace) // next use of a resident key, -1 if absent
	for i := range resident {
		resident[i] = -1
	}
	var h []beladyEntry
	push := func(e beladyEntry) {
		h = append(h, e)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !beladyLess(h[p], h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
	}
	pop := func() {
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			c := 2*i + 1
			if c >= len(h) {
				break
			}
			if c+1 < len(h) && beladyLess(h[c], h[c+1]) {
				c++
			}
			if !beladyLess(h[i], h[c]) {
				break
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	size := 0
	for i, k := range keys {
		nu := next[i]
		if resident[k] >= 0 {
			st.Hits++
			resident[k] = nu
			push(beladyEntry{nu, k})
			continue
		}
		st.Misses++
		if size >= capacity {
			for resident[h[0].key] != h[0].next { // stale entry
				pop()
			}
			if h[0].next < nu { // everything resident is needed sooner
				continue
			}
			resident[h[0].key] = -1
			pop()
			size--
			st.Evictions++
		}
		resident[k] = nu
		size++
		push(beladyEntry{nu, k})
	}
	return st
}

// beladyLess orders the max-heap: farther next use first, ties to the
// larger key (ties only happen between keys never used again).
func beladyLess(a, b beladyEntry) bool {
	if a.next != b.next {
		return a.next < b.next
	}
	return a.key < b.key
}
