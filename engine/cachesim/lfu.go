package cachesim

// LFU evicts the resident key with the fewest requests so far, counting the
// key's whole history (requests made while it was not resident included);
// ties go to the least recently used. Counts never decay. It is the online
// counterpart of pinning from a histogram: the experts the router keeps
// choosing stay, one-off experts leave first.
type LFU struct {
	slots
	count []uint32 // per key: requests so far
	last  []uint64 // per slot: tick of the last request
	heap  []int32  // min-heap of slots by (count, last)
	pos   []int32  // per slot: position in heap
	tick  uint64
}

// NewLFU returns an LFU policy with capacity slots.
func NewLFU(capacity, keySpace int) *LFU {
	return &LFU{
		slots: newSlots(capacity, keySpace),
		count: make([]uint32, max(keySpace, 0)),
		last:  make([]uint64, capacity),
		heap:  make([]int32, 0, capacity),
		pos:   make([]int32, capacity),
	}
}

func (p *LFU) Name() string { return "LFU" }

func (p *LFU) Reset() {
	p.resetSlots()
	clear(p.count)
	p.heap = p.heap[:0]
	p.tick = 0
}

func (p *LFU) less(a, b int32) bool {
	ca, cb := p.count[p.keyOf[a]], p.count[p.keyOf[b]]
	if ca != cb {
		return ca < cb
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
	if i != last {
		p.swap(i, last)
	}
	p.heap = p.heap[:last]
	if i != last {
		p.down(i)
		p.up(i)
	}
}

func (p *LFU) Access(key uint64) Event {
	p.tick++
	if key >= uint64(len(p.count)) {
		c := make([]uint32, growTo(key))
		copy(c, p.count)
		p.count = c
	}
	if p.count[key] < ^uint32(0) {
		p.count[key]++
	}
	if i := p.index.get(key); i != none {
		p.last[i] = p.tick
		p.down(int(p.pos[i]))
		return Event{Hit: true}
	}
	var ev Event
	if len(p.free) == 0 {
		at := 0
		if !p.evictable(p.heap[0]) { // rare: linear search for the best evictable slot
			at = -1
			for j, s := range p.heap {
				if p.evictable(s) && (at < 0 || p.less(s, p.heap[at])) {
					at = j
				}
			}
			if at < 0 {
				return ev
			}
		}
		v := p.heap[at]
		ev.Evicted, ev.Victim = true, p.keyOf[v]
		p.removeAt(at)
		p.release(v)
	}
	i := p.take(key)
	p.last[i] = p.tick
	p.pos[i] = int32(len(p.heap))
	p.heap = append(p.heap, i)
	p.up(len(p.heap) - 1)
	ev.Admitted = true
	return ev
}

func (p *LFU) Remove(key uint64) bool {
	i := p.index.get(key)
	if i == none {
		return false
	}
	p.removeAt(int(p.pos[i]))
	p.release(i)
	return true
}
