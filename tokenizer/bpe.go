package tokenizer

// Byte-level BPE as tiktoken does it: no merge list; the piece starts as
// single bytes and the adjacent pair whose concatenation has the lowest rank
// is merged, repeatedly, until no adjacent pair is a token. Among equal
// ranks (the same pair at several places) the leftmost merges first. A piece
// that is itself a token is emitted directly, as tiktoken does before BPE.
//
// Short pieces use tiktoken's array scan (quadratic but tiny); long pieces
// use a doubly linked list of parts with a min-heap of candidate pairs keyed
// by (rank, start), which gives the same merge order in O(n log n).

const smallPiece = 64

const noRank = int32(^uint32(0) >> 1)

// bpePart is one part of a piece during the array-scan merge.
type bpePart struct{ start, rank int32 }

// bpe appends the ids of piece to out; scratch is reusable working space.
func (t *Tokenizer) bpe(piece string, out []int, scratch *[]bpePart) []int {
	if len(piece) == 1 {
		return append(out, t.byteRank[piece[0]])
	}
	if r, ok := t.ranks[piece]; ok {
		return append(out, r)
	}
	if len(piece) <= smallPiece {
		return t.bpeSmall(piece, out, scratch)
	}
	return t.bpeLarge(piece, out)
}

func (t *Tokenizer) rankOf(s string) int32 {
	if r, ok := t.ranks[s]; ok {
		return int32(r)
	}
	return noRank
}

func (t *Tokenizer) bpeSmall(piece string, out []int, scratch *[]bpePart) []int {
	n := len(piece)
	if cap(*scratch) < n+1 {
		*scratch = make([]bpePart, smallPiece+1)
	}
	parts := (*scratch)[:n+1]
	for i := 0; i < n; i++ {
		parts[i] = bpePart{int32(i), noRank}
		if i+1 < n {
			parts[i].rank = t.rankOf(piece[i : i+2])
		}
	}
	parts[n] = bpePart{int32(n), noRank}
	// pairRank is the rank of parts i and i+1 merged, as seen after the
	// part at i+1 is removed (hence i+3).
	pairRank := func(i int) int32 {
		if i+3 < len(parts) {
			return t.rankOf(piece[parts[i].start:parts[i+3].start])
		}
		return noRank
	}
	for len(parts) > 2 {
		best, at := noRank, -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < best {
				best, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		if at > 0 {
			parts[at-1].rank = pairRank(at - 1)
		}
		parts[at].rank = pairRank(at)
		copy(parts[at+1:], parts[at+2:])
		parts = parts[:len(parts)-1]
	}
	for i := 0; i+1 < len(parts); i++ {
		out = append(out, t.ranks[piece[parts[i].start:parts[i+1].start]])
	}
	return out
}

func (t *Tokenizer) bpeLarge(piece string, out []int) []int {
	n := len(piece)
	next := make([]int32, n) // start of the following part (n at the end)
	prev := make([]int32, n) // start of the preceding part (-1 at the start)
	cur := make([]int32, n)  // rank of the pair starting here, -1 if none
	for i := 0; i < n; i++ {
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
		cur[i] = -1
	}
	h := make(pairHeap, 0, n)
	pairAt := func(i int) int32 {
		j := int(next[i])
		if j >= n {
			return -1
		}
		if r, ok := t.ranks[piece[i:int(next[j])]]; ok {
			return int32(r)
		}
		return -1
	}
	for i := 0; i+1 < n; i++ {
		if r := pairAt(i); r >= 0 {
			cur[i] = r
			h = append(h, uint64(r)<<32|uint64(i))
		}
	}
	h.init()
	for len(h) > 0 {
		top := h.pop()
		r, i := int32(top>>32), int(uint32(top))
		if cur[i] != r { // stale: this part was merged away or changed
			continue
		}
		j := int(next[i])
		k := next[j]
		next[i] = k
		if int(k) < n {
			prev[k] = int32(i)
		}
		cur[j] = -1
		next[j] = -1
		if nr := pairAt(i); nr >= 0 {
			cur[i] = nr
			h.push(uint64(nr)<<32 | uint64(i))
		} else {
			cur[i] = -1
		}
		if p := int(prev[i]); p >= 0 {
			if pr := pairAt(p); pr >= 0 {
				cur[p] = pr
				h.push(uint64(pr)<<32 | uint64(p))
			} else {
				cur[p] = -1
			}
		}
	}
	for i := 0; i < n; i = int(next[i]) {
		out = append(out, t.ranks[piece[i:int(next[i])]])
	}
	return out
}

// pairHeap is a binary min-heap of rank<<32|start keys.
type pairHeap []uint64

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(x uint64) {
	*h = append(*h, x)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *pairHeap) pop() uint64 {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
