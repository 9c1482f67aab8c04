package cachesim

import "k3/engine/expertcache"

// PinnedLRU holds a fixed set of keys permanently and runs LRU over the
// remaining slots, as the C tool's pinned-LRU does:
//
//   - the pinned set reserves its slots up front: the LRU part gets
//     max(capacity - len(pinned), 1) slots; at most capacity-1 keys are
//     pinned (extra ones are ignored, in the order given);
//   - a pinned key is still read once: its first request is a miss (no
//     eviction), every later one a hit, and it is never evicted.
//
// With the pinned set chosen from the very trace being replayed (SimPinnedLRU)
// this is a ceiling that uses future knowledge; with a set chosen from a
// previous run's counts it would be an online policy.
type PinnedLRU struct {
	lru      *expertcache.LRU
	capacity int
	pin      []uint8 // per key: 0 not pinned, 1 pinned not loaded, 2 pinned and loaded
	npin     int
	loaded   int
}

// NewPinnedLRU pins the given keys (duplicates count once).
func NewPinnedLRU(capacity, keySpace int, pinned []uint64) *PinnedLRU {
	if capacity < 1 {
		panic("cachesim: capacity < 1")
	}
	p := &PinnedLRU{capacity: capacity}
	if keySpace > 0 {
		p.pin = make([]uint8, keySpace)
	}
	for _, k := range pinned {
		if p.npin >= capacity-1 {
			break
		}
		if k >= uint64(len(p.pin)) {
			m := make([]uint8, growTo(k))
			copy(m, p.pin)
			p.pin = m
		}
		if p.pin[k] == 0 {
			p.pin[k] = 1
			p.npin++
		}
	}
	p.lru = expertcache.NewLRU(max(capacity-p.npin, 1), keySpace)
	return p
}

func (p *PinnedLRU) Name() string  { return PolicyPinnedLRU }
func (p *PinnedLRU) Capacity() int { return p.capacity }
func (p *PinnedLRU) Len() int      { return p.loaded + p.lru.Len() }

// Pinned is the number of pinned keys.
func (p *PinnedLRU) Pinned() int { return p.npin }

func (p *PinnedLRU) pinState(key uint64) uint8 {
	if key < uint64(len(p.pin)) {
		return p.pin[key]
	}
	return 0
}

func (p *PinnedLRU) Contains(key uint64) bool {
	if s := p.pinState(key); s != 0 {
		return s == 2
	}
	return p.lru.Contains(key)
}

func (p *PinnedLRU) Access(key uint64) expertcache.Event {
	switch p.pinState(key) {
	case 2:
		return expertcache.Event{Hit: true}
	case 1:
		p.pin[key] = 2
		p.loaded++
		return expertcache.Event{Admitted: true}
	}
	return p.lru.Access(key)
}

func (p *PinnedLRU) Remove(key uint64) bool {
	if s := p.pinState(key); s != 0 {
		if s == 2 {
			p.pin[key] = 1
			p.loaded--
			return true
		}
		return false
	}
	return p.lru.Remove(key)
}

func (p *PinnedLRU) SetEvictable(ok func(key uint64) bool) { p.lru.SetEvictable(ok) }

func (p *PinnedLRU) Reset() {
	p.lru.Reset()
	for i, s := range p.pin {
		if s == 2 {
			p.pin[i] = 1
		}
	}
	p.loaded = 0
}
