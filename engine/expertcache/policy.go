// Package expertcache holds the replacement policies the engine's routed-expert
// cache runs on the decode path (lru, s3fifo, layer and layer+r) and the one
// registry of their names (Lookup, Names, New; Default is "layer+r"). They are
// online and allocation-free once the key space is reserved; engine/cachesim
// replays traces through them and adds policies of its own (lfu, s3fifo-ws
// and the offline belady and pin+lru).
package expertcache

import "fmt"

// Policy is an online replacement policy over a fixed number of slots. Keys
// are dense non-negative integers (the engine uses layer*nExperts+expert; see
// Key); per-key state is held in slices indexed by key, grown on first sight
// of a larger key, so once the key space has been seen (or reserved with
// the constructors' keySpace argument) Access does not allocate.
//
// Policies are deterministic and not safe for concurrent use: the engine's
// cache calls them under its own lock.
type Policy interface {
	// Name is the policy's name (for this package's policies, the registry's:
	// "lru", "s3fifo", ...).
	Name() string
	// Capacity is the number of slots.
	Capacity() int
	// Len is the number of resident keys.
	Len() int
	// Contains reports whether key is resident, without touching it.
	Contains(key uint64) bool
	// Access records one request for key. A resident key is a hit. Otherwise
	// the key is admitted, evicting one resident key first if the cache is
	// full; if every candidate is refused by the SetEvictable hook the key is
	// not admitted (Event.Admitted false).
	Access(key uint64) Event
	// Remove drops a resident key (e.g. its read failed); it reports whether
	// the key was resident.
	Remove(key uint64) bool
	// SetEvictable installs a hook that may refuse a victim (a slot being
	// read, or one handed out to the batch in flight); nil allows all.
	SetEvictable(ok func(key uint64) bool)
	// Reset empties the cache and forgets all history.
	Reset()
}

// Event is the outcome of one Access.
type Event struct {
	Hit      bool   // the key was resident
	Admitted bool   // on a miss: the key is now resident
	Evicted  bool   // a resident key was dropped to make room
	Victim   uint64 // the dropped key, when Evicted
}

// Key is the dense key of (layer, expert) for a model with nExperts routed
// experts per layer; it is the engine's slot_of index.
func Key(layer, expert, nExperts int32) uint64 {
	return uint64(layer)*uint64(nExperts) + uint64(expert)
}

// MaxKey bounds dense keys: a larger key is a caller bug (a raw 64-bit
// hash instead of layer*nExperts+expert) and panics rather than allocating
// gigabytes of per-key state.
const MaxKey = 1 << 28

const none = -1

// slotIndex maps a dense key to its slot (none if absent).
type slotIndex struct{ slot []int32 }

func (x *slotIndex) reserve(n int) {
	if n > len(x.slot) {
		if n > MaxKey {
			panic(fmt.Sprintf("expertcache: key space %d exceeds MaxKey %d (keys must be dense, e.g. layer*nExperts+expert)", n, MaxKey))
		}
		s := make([]int32, n)
		copy(s, x.slot)
		for i := len(x.slot); i < n; i++ {
			s[i] = none
		}
		x.slot = s
	}
}

func (x *slotIndex) get(key uint64) int32 {
	if key >= uint64(len(x.slot)) {
		return none
	}
	return x.slot[key]
}

func (x *slotIndex) set(key uint64, s int32) {
	if key >= uint64(len(x.slot)) {
		x.reserve(growTo(key))
	}
	x.slot[key] = s
}

func (x *slotIndex) clear() {
	for i := range x.slot {
		x.slot[i] = none
	}
}

// growTo is the new length of per-key state that must hold key.
func growTo(key uint64) int {
	if key >= MaxKey {
		panic(fmt.Sprintf("expertcache: key %d exceeds MaxKey %d (keys must be dense, e.g. layer*nExperts+expert)", key, MaxKey))
	}
	n := uint64(1024)
	for n <= key {
		n *= 2
	}
	if n > MaxKey {
		n = MaxKey
	}
	return int(n)
}

// lists is a set of intrusive circular doubly linked lists over slot
// indices 0..n-1; list j's sentinel is node n+j. Front is the oldest end.
type lists struct {
	prev, next []int32
	n          int32
}

func newLists(n, nLists int) lists {
	l := lists{prev: make([]int32, n+nLists), next: make([]int32, n+nLists), n: int32(n)}
	l.reset(nLists)
	return l
}

func (l *lists) reset(nLists int) {
	for j := 0; j < nLists; j++ {
		s := l.n + int32(j)
		l.prev[s], l.next[s] = s, s
	}
}

func (l *lists) pushBack(list int, i int32) {
	s := l.n + int32(list)
	p := l.prev[s]
	l.next[p], l.prev[i] = i, p
	l.next[i], l.prev[s] = s, i
}

func (l *lists) unlink(i int32) {
	p, n := l.prev[i], l.next[i]
	l.next[p], l.prev[n] = n, p
}

// front returns the oldest node of list, or none.
func (l *lists) front(list int) int32 {
	s := l.n + int32(list)
	if f := l.next[s]; f != s {
		return f
	}
	return none
}

// after returns the node after i within list, or none at the end.
func (l *lists) after(list int, i int32) int32 {
	if n := l.next[i]; n != l.n+int32(list) {
		return n
	}
	return none
}

// slots is the slot bookkeeping every policy shares: key per slot, the
// key->slot index and the free slots.
type slots struct {
	keyOf []uint64
	index slotIndex
	free  []int32 // stack of free slots
	used  int
	ok    func(uint64) bool
}

func newSlots(capacity, keySpace int) slots {
	if capacity < 1 {
		panic(fmt.Sprintf("expertcache: capacity %d < 1", capacity))
	}
	s := slots{keyOf: make([]uint64, capacity), free: make([]int32, 0, capacity)}
	s.index.reserve(keySpace)
	s.resetSlots()
	return s
}

func (s *slots) resetSlots() {
	s.free = s.free[:0]
	for i := int32(len(s.keyOf)) - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	s.used = 0
	s.index.clear()
}

func (s *slots) evictable(i int32) bool { return s.ok == nil || s.ok(s.keyOf[i]) }

// take binds key to a free slot; the caller has made room.
func (s *slots) take(key uint64) int32 {
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.keyOf[i] = key
	s.index.set(key, i)
	s.used++
	return i
}

// release frees slot i.
func (s *slots) release(i int32) {
	s.index.slot[s.keyOf[i]] = none
	s.free = append(s.free, i)
	s.used--
}

func (s *slots) Capacity() int                         { return len(s.keyOf) }
func (s *slots) Len() int                              { return s.used }
func (s *slots) Contains(key uint64) bool              { return s.index.get(key) != none }
func (s *slots) SetEvictable(ok func(key uint64) bool) { s.ok = ok }

// LRU evicts the least recently used evictable key.
type LRU struct {
	slots
	l lists
}

// NewLRU returns an LRU policy with capacity slots; keySpace (may be 0)
// pre-sizes the per-key index for keys below it.
func NewLRU(capacity, keySpace int) *LRU {
	return &LRU{slots: newSlots(capacity, keySpace), l: newLists(capacity, 1)}
}

func (p *LRU) Name() string { return NameLRU }

func (p *LRU) Reset() {
	p.resetSlots()
	p.l.reset(1)
}

func (p *LRU) Access(key uint64) Event {
	if i := p.index.get(key); i != none {
		p.l.unlink(i)
		p.l.pushBack(0, i)
		return Event{Hit: true}
	}
	var ev Event
	if len(p.free) == 0 {
		v := p.l.front(0)
		for v != none && !p.evictable(v) {
			v = p.l.after(0, v)
		}
		if v == none {
			return ev
		}
		ev.Evicted, ev.Victim = true, p.keyOf[v]
		p.l.unlink(v)
		p.release(v)
	}
	p.l.pushBack(0, p.take(key))
	ev.Admitted = true
	return ev
}

func (p *LRU) Remove(key uint64) bool {
	i := p.index.get(key)
	if i == none {
		return false
	}
	p.l.unlink(i)
	p.release(i)
	return true
}
