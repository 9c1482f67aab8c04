package cachesim

import (
	"fmt"

	"k3/engine/expertcache"
)

// LFU evicts the resident key with the fewest requests so far, counting the
// key's whole history (requests made while it was not resident included);
// ties go to the least recently used. Counts never decay. It is the online
// counterpart of pinning from a histogram: the experts the router keeps
// choosing stay, one-off experts leave first. The simulator's own: the
// engine does not offer it.
type LFU struct {
	capacity int
	count    []uint32 // per key: requests so far
	last     []uint64 // per key: tick of its last request
	pos      []int32  // per key: position in heap, -1 when not resident
	heap     []uint64 // min-heap of resident keys by (count, last)
	ok       func(uint64) bool
	tick     uint64
}

// NewLFU returns an LFU policy with capacity slots; keySpace (may be 0)
// pre-sizes the per-key state for keys below it.
func NewLFU(capacity, keySpace int) *LFU {
	if capacity < 1 {
		panic(fmt.Sprintf("cachesim: capacity %d < 1", capacity))
	}
	p := &LFU{capacity: capacity, heap: make([]uint64, 0, capacity)}
	p.reserve(keySpace)
	return p
}

// reserve grows the per-key state to n keys.
func (p *LFU) reserve(n int) {
	if n <= len(p.pos) {
		return
	}
	old := len(p.pos)
	p.count = append(p.count, make([]uint32, n-old)...)
	p.last = append(p.last, make([]uint64, n-old)...)
	p.pos = append(p.pos, make([]int32, n-old)...)
	for i := old; i < n; i++ {
		p.pos[i] = -1
	}
}

func (p *LFU) Name() string                          { return PolicyLFU }
func (p *LFU) Capacity() int                         { return p.capacity }
func (p *LFU) Len() int                              { return len(p.heap) }
func (p *LFU) SetEvictable(ok func(key uint64) bool) { p.ok = ok }

func (p *LFU) Contains(key uint64) bool {
	return key < uint64(len(p.pos)) && p.pos[key] >= 0
}

func (p *LFU) Reset() {
	clear(p.count)
	clear(p.last)
	for i := range p.pos {
		p.pos[i] = -1
	}
	p.heap = p.heap[:0]
	p.tick = 0
}

func (p *LFU) evictable(key uint64) bool { return p.ok == nil || p.ok(key) }

func (p *LFU) less(a, b uint64) bool {
	if p.count[a] != p.count[b] {
		return p.count[a] < p.count[b]
	}
	return p.last[a] < p.last[b]
}

func (p *LFU) swap(i, j int) {
	h := p.heap
	h[i], h[j] = h[j], h[i]
	p.pos[h[i]], p.pos[h[j]] = int32(i), int32(j)
}

func (p *LFU) up(i int) {
	for i > 0 {
		par := (i - 1) / 2
		if !p.less(p.heap[i], p.heap[par]) {
			return
		}
		p.swap(i, par)
		i = par
	}
}

func (p *LFU) down(i int) {
	n := len(p.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && p.less(p.heap[c+1], p.heap[c]) {
			c++
		}
		if !p.less(p.heap[c], p.heap[i]) {
			return
		}
		p.swap(i, c)
		i = c
	}
}

func (p *LFU) removeAt(i int) {
	last := len(p.heap) - 1
	p.pos[p.heap[i]] = -1
	if i != last {
		p.heap[i] = p.heap[last]
		p.pos[p.heap[i]] = int32(i)
	}
	p.heap = p.heap[:last]
	if i != last {
		p.down(i)
		p.up(i)
	}
}

func (p *LFU) Access(key uint64) expertcache.Event {
	p.tick++
	if key >= uint64(len(p.pos)) {
		p.reserve(growTo(key))
	}
	if p.count[key] < ^uint32(0) {
		p.count[key]++
	}
	if i := p.pos[key]; i >= 0 {
		p.last[key] = p.tick
		p.down(int(i))
		return expertcache.Event{Hit: true}
	}
	var ev expertcache.Event
	if len(p.heap) == p.capacity {
		at := 0
		if !p.evictable(p.heap[0]) { // rare: linear search for the best evictable key
			at = -1
			for j, k := range p.heap {
				if p.evictable(k) && (at < 0 || p.less(k, p.heap[at])) {
					at = j
				}
			}
			if at < 0 {
				return ev
			}
		}
		ev.Evicted, ev.Victim = true, p.heap[at]
		p.removeAt(at)
	}
	p.last[key] = p.tick
	p.pos[key] = int32(len(p.heap))
	p.heap = append(p.heap, key)
	p.up(len(p.heap) - 1)
	ev.Admitted = true
	return ev
}

func (p *LFU) Remove(key uint64) bool {
	if !p.Contains(key) {
		return false
	}
	p.removeAt(int(p.pos[key]))
	return true
}

// growTo is the new length of per-key state that must hold key.
func growTo(key uint64) int {
	if key >= expertcache.MaxKey {
		panic(fmt.Sprintf("cachesim: key %d exceeds MaxKey %d (keys must be dense, e.g. layer*nExperts+expert)", key, expertcache.MaxKey))
	}
	n := uint64(1024)
	for n <= key {
		n *= 2
	}
	return int(min(n, expertcache.MaxKey))
}
