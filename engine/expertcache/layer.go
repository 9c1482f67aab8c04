package expertcache

import (
	"fmt"
	"math/bits"
)

// LayerCycle is a layer-aware policy for a model that visits its MoE layers
// in a fixed cycle (every token, and in full-recompute decoding every step,
// walks layers 0..nLayers-1 in order). Keys must be layer*nExperts+expert.
//
// On a miss at layer c the victim comes from the layer whose next visit is
// farthest away in that cycle: c-1 (just finished) first, then c-2, ...,
// wrapping, and c itself last; within a layer, the least recently used
// evictable key. An expert of a layer that is about to run is thus never
// dropped to make room for one of a layer that has just run, which is what
// LRU does on every cycle longer than the cache. The effect is that most of
// the cache holds a stable set of layers across cycles and the misses churn
// through a small window behind the current layer.
type LayerCycle struct {
	slots
	l        lists // one LRU list per layer
	nLayers  int
	nExperts uint64
	count    []int32  // residents per layer
	nonEmpty []uint64 // bitset of layers with residents

	// recency mode (layer+r): a resident untouched since before the previous
	// visit of the current layer began (it sat out one whole cycle) goes first,
	// oldest first; only when there is none does the cycle rule apply.
	recency    bool
	g          lists    // global LRU list (recency mode)
	lastUse    []uint64 // per slot
	tick       uint64
	cur        int      // layer of the visit in progress, -1 before the first
	visitStart []uint64 // per layer: tick its latest visit began
	prevStart  []uint64 // per layer: tick its visit before that began (0 = none)
}

// NewLayerCycle returns the policy for nLayers layers of nExperts experts.
func NewLayerCycle(capacity, nLayers, nExperts int) *LayerCycle {
	if nLayers < 1 || nExperts < 1 {
		panic(fmt.Sprintf("expertcache: LayerCycle needs nLayers, nExperts >= 1 (got %d, %d)", nLayers, nExperts))
	}
	return &LayerCycle{
		slots:    newSlots(capacity, nLayers*nExperts),
		l:        newLists(capacity, nLayers),
		nLayers:  nLayers,
		nExperts: uint64(nExperts),
		count:    make([]int32, nLayers),
		nonEmpty: make([]uint64, (nLayers+63)/64),
		cur:      -1,
	}
}

// NewLayerCycleRecency returns layer+r: LayerCycle that first evicts, least
// recently used first, any resident not touched during the last full cycle
// (since the previous visit of the requesting layer began). Under
// incremental decoding with a cache larger than one token's working set this
// keeps the last token's experts like LRU; below that, or under full
// recompute, nothing is that old and it behaves as LayerCycle.
func NewLayerCycleRecency(capacity, nLayers, nExperts int) *LayerCycle {
	p := NewLayerCycle(capacity, nLayers, nExperts)
	p.recency = true
	p.g = newLists(capacity, 1)
	p.lastUse = make([]uint64, capacity)
	p.visitStart = make([]uint64, nLayers)
	p.prevStart = make([]uint64, nLayers)
	return p
}

func (p *LayerCycle) Name() string {
	if p.recency {
		return NameLayerR
	}
	return NameLayer
}

func (p *LayerCycle) Reset() {
	p.resetSlots()
	p.l.reset(p.nLayers)
	clear(p.count)
	clear(p.nonEmpty)
	if p.recency {
		p.g.reset(1)
		p.tick, p.cur = 0, -1
		clear(p.visitStart)
		clear(p.prevStart)
	}
}

func (p *LayerCycle) layer(key uint64) int {
	l := key / p.nExperts
	if l >= uint64(p.nLayers) {
		panic(fmt.Sprintf("expertcache: LayerCycle key %d is beyond layer %d", key, p.nLayers-1))
	}
	return int(l)
}

func (p *LayerCycle) Access(key uint64) Event {
	c := p.layer(key)
	if p.recency {
		p.tick++
		if c != p.cur {
			p.cur = c
			p.prevStart[c], p.visitStart[c] = p.visitStart[c], p.tick
		}
	}
	if i := p.index.get(key); i != none {
		p.l.unlink(i)
		p.l.pushBack(c, i)
		if p.recency {
			p.lastUse[i] = p.tick
			p.g.unlink(i)
			p.g.pushBack(0, i)
		}
		return Event{Hit: true}
	}
	var ev Event
	if len(p.free) == 0 {
		v := int32(none)
		if p.recency {
			for i := p.g.front(0); i != none && p.lastUse[i] < p.prevStart[c]; i = p.g.after(0, i) {
				if p.evictable(i) {
					v = i
					break
				}
			}
		}
		if v == none {
			v = p.cycleVictim(c-1, 0)
		}
		if v == none {
			v = p.cycleVictim(p.nLayers-1, c)
		}
		if v == none {
			return ev
		}
		ev.Evicted, ev.Victim = true, p.keyOf[v]
		p.drop(v)
	}
	i := p.take(key)
	p.l.pushBack(c, i)
	if p.count[c]++; p.count[c] == 1 {
		p.nonEmpty[c>>6] |= 1 << (c & 63)
	}
	if p.recency {
		p.lastUse[i] = p.tick
		p.g.pushBack(0, i)
	}
	ev.Admitted = true
	return ev
}

func (p *LayerCycle) drop(i int32) {
	p.l.unlink(i)
	if p.recency {
		p.g.unlink(i)
	}
	l := p.layer(p.keyOf[i])
	if p.count[l]--; p.count[l] == 0 {
		p.nonEmpty[l>>6] &^= 1 << (l & 63)
	}
	p.release(i)
}

func (p *LayerCycle) Remove(key uint64) bool {
	i := p.index.get(key)
	if i == none {
		return false
	}
	p.drop(i)
	return true
}

// cycleVictim returns the least recently used evictable resident of the
// highest non-empty layer in [lo, hi], trying lower layers while a layer's
// residents are all refused; none if there is none.
func (p *LayerCycle) cycleVictim(hi, lo int) int32 {
	for l := p.prevNonEmpty(hi); l >= lo; l = p.prevNonEmpty(l - 1) {
		for i := p.l.front(l); i != none; i = p.l.after(l, i) {
			if p.evictable(i) {
				return i
			}
		}
	}
	return none
}

// prevNonEmpty is the highest layer <= i with residents, or -1.
func (p *LayerCycle) prevNonEmpty(i int) int {
	if i < 0 {
		return -1
	}
	w := i >> 6
	word := p.nonEmpty[w] & (uint64(2)<<uint(i&63) - 1)
	for {
		if word != 0 {
			return w<<6 + 63 - bits.LeadingZeros64(word)
		}
		if w--; w < 0 {
			return -1
		}
		word = p.nonEmpty[w]
	}
}
