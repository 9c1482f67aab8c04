package engine

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"k3/engine/expertcache"
	"k3/engine/plan"
	"k3/kernels"
	"k3/storage/config"
	"k3/storage/direct"
	st "k3/storage/safetensors"
)

// ExpertSource supplies routed experts: the ExpertStore, which reads them
// from the shards into a cache (tests supply in-memory ones).
type ExpertSource interface {
	// Acquire makes the experts of a layer resident and pins them until
	// Release; a failed read returns an *ExpertError.
	Acquire(layer int, experts []int) ([]*Expert, error)
	Release(layer int, experts []int)
	// Each makes the experts of a layer resident and calls use(i, expert)
	// for experts[i] as soon as it is: the cached ones first, then the
	// ones read from disk in the order they land, while the others are
	// still being read. Any number of experts may be asked for: at most
	// MaxPinned are held at once, and the slot of one that has been used
	// takes the next. It returns when every read is done and every expert
	// released; a failed read returns an *ExpertError (use is not called
	// for the experts that land after it).
	Each(layer int, experts []int, use func(i int, ex *Expert)) error
	// MaxPinned is how many experts one Acquire may hold.
	MaxPinned() int
	Stats() ExpertStats
	// ExpertBytes is the size of one expert's tensors.
	ExpertBytes() int64
	// IONotes says where reads fell back to buffered I/O.
	IONotes() []string
	Close()
}

// Expert is one routed expert's matrices (MXFP4 in the released checkpoint): W1 (gate) and W3 (up) map the
// latent to the intermediate width, W2 (down) maps back.
type Expert struct {
	W1, W3, W2 kernels.Mat
	Bytes      int64
}

// ExpertError reports a routed expert that could not be loaded: the run that
// needed it is invalid.
type ExpertError struct {
	Layer, Expert int
	Path          string
	Err           error
}

func (e *ExpertError) Error() string {
	return fmt.Sprintf("routed expert %d of layer %d failed to load from %s: %v", e.Expert, e.Layer, e.Path, e.Err)
}

func (e *ExpertError) Unwrap() error { return e.Err }

// ExpertStats are the expert store's counters.
type ExpertStats struct {
	Requests       int64 // experts asked for
	Hits           int64 // served from RAM (resident when asked: the true resident hit rate)
	Misses         int64
	Evictions      int64
	BytesRead      int64
	ReadSeconds    float64 // wall time spent waiting for expert reads
	NaNScaleGroups int64   // E8M0 scale bytes equal to 255 seen in loaded experts
	Failures       int64
}

// Sub returns the counters accumulated since an earlier snapshot.
func (a ExpertStats) Sub(b ExpertStats) ExpertStats {
	return ExpertStats{a.Requests - b.Requests, a.Hits - b.Hits, a.Misses - b.Misses, a.Evictions - b.Evictions,
		a.BytesRead - b.BytesRead, a.ReadSeconds - b.ReadSeconds, a.NaNScaleGroups - b.NaNScaleGroups, a.Failures - b.Failures}
}

// ExpertStore is the routed-expert cache. Experts live in fixed-size slots of
// one huge-page arena; a (layer, expert) key maps to a slot that is empty,
// in flight or ready. Acquire pins the experts a layer needs: the misses are
// reserved serially (evicting the least recently used unpinned experts), then
// read in parallel in disk-offset order, one read per expert (its six
// tensors are one run in the shard). Release unpins them.
type ExpertStore struct {
	set  *st.Set
	cfg  *config.Config
	locs []expertLoc // by layer*Experts+expert; ok marks the located
	// paths are the set's files (expertLoc.files index them); fileIndex
	// maps a path to its index; partSizes are an expert's parts' bytes.
	paths     []string
	fileIndex map[string]int32
	partSizes [6]int64

	// readAt reads len(dst) bytes at off from path: with O_DIRECT where
	// possible, or Options.ExpertReadAt.
	readAt func(path string, off int64, dst []byte) error
	// queueDepth is how many expert reads run at once.
	queueDepth int
	// trace, when set, receives every request in order.
	trace func(layer, expert int)
	// io, when set, measures the time reads are in flight.
	io *ioTracker

	mu       sync.Mutex
	budget   int64
	slotSize int64
	arena    *direct.Buffer
	heap     [][]byte // fallback slot memory when no arena
	slots    []*slot
	index    map[int]*slot
	pol      expertcache.Policy
	free     []*slot
	// policy names the replacement policy, one of expertcache.Names() (""
	// is expertcache.Default).
	policy string
	stats  ExpertStats
	files  map[string]*direct.File
	bound  int              // layers bound (caps the useful cache size)
	sizes  map[string]int64 // shard sizes, for runs that end a file
}

type slot struct {
	mem  []byte
	key  int
	ex   *Expert
	pins int
}

// newExpertStore returns the store of the first `layers` layers' experts
// with a cache of budget bytes (at least plan.MinExpertSlots are kept)
// under the named replacement policy.
func newExpertStore(set *st.Set, cfg *config.Config, layers int, budget int64, policy string) *ExpertStore {
	s := &ExpertStore{set: set, cfg: cfg, locs: make([]expertLoc, layers*cfg.Experts), bound: layers, policy: policy,
		index: map[int]*slot{}, budget: budget, files: map[string]*direct.File{}, queueDepth: plan.ExpertQueueDepth,
		fileIndex: map[string]int32{}, partSizes: expertPartSizes(cfg)}
	for i, f := range set.Files() {
		s.paths = append(s.paths, f.Path)
		s.fileIndex[f.Path] = int32(i)
	}
	s.readAt = s.readDirect
	return s
}

// Slots returns the number of slots the budget gives.
func (s *ExpertStore) Slots() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capacity()
}

func (s *ExpertStore) capacity() int {
	size := s.slotBytes()
	n := int(s.budget / size)
	if all := s.cfg.Experts * max(1, s.bound-s.cfg.FirstKDense); n > all {
		n = all
	}
	return max(n, plan.MinExpertSlots(s.cfg.TopK))
}

// slotBytes is one slot: the aligned span covering an expert's run.
func (s *ExpertStore) slotBytes() int64 {
	if s.slotSize == 0 {
		s.slotSize = slotSizeFor(s.ExpertBytes())
	}
	return s.slotSize
}

// Stats returns a snapshot of the counters.
func (s *ExpertStore) Stats() ExpertStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ExpertBytes is the size of one expert's six tensors.
func (s *ExpertStore) ExpertBytes() int64 { return s.cfg.ExpertBytes() }

// slotSizeFor is one cache slot: the expert run rounded up to the O_DIRECT
// alignment plus one page, so the aligned span covering a run at any offset fits.
func slotSizeFor(n int64) int64 { return direct.AlignUp(n) + direct.Align }

// MaxPinned is how many experts one Acquire may hold.
func (s *ExpertStore) MaxPinned() int { return s.Slots() }

// Acquire makes the experts of layer li resident and pins them until
// Release. len(experts) must not exceed MaxPinned and must be distinct.
func (s *ExpertStore) Acquire(li int, experts []int) ([]*Expert, error) {
	out := make([]*Expert, len(experts))
	misses, err := s.reserve(li, experts, out)
	if err != nil || len(misses) == 0 {
		return out, err
	}
	t0 := time.Now()
	done := make(chan *expertMiss, len(misses))
	go s.read(misses, done)
	for range misses {
		<-done
	}
	if err := s.settle(li, experts, misses, out, time.Since(t0).Seconds()); err != nil {
		s.Release(li, pinned(experts, out))
		return nil, err
	}
	return out, nil
}

// Each makes the experts of layer li resident and calls use for each as
// soon as it is (see ExpertSource); the experts must be distinct. It holds
// at most MaxPinned of them at once: the first MaxPinned are reserved (the
// misses read queueDepth at a time, in disk-offset order), and each time
// one has been used its pin is dropped and the next expert reserved, so
// the reads stay in flight while one expert computes, with no pause
// between groups. Which experts are held together changes no value: each
// use writes only its own rows. Only the time use is not running and no
// read has landed counts as waiting (ExpertStats.ReadSeconds).
func (s *ExpertStore) Each(li int, experts []int, use func(i int, ex *Expert)) error {
	r := &rolling{s: s, li: li, experts: experts, out: make([]*Expert, len(experts)), done: make(chan *expertMiss, len(experts))}
	r.feed = s.readers(len(experts), r.done)
	defer close(r.feed)
	defer func() {
		// a use that panics (a server recovers it) leaves no slot pinned:
		// the reads in flight land first, then every pin is dropped
		if p := recover(); p != nil {
			_ = r.drain()
			panic(p)
		}
	}()
	if err := r.reserve(s.MaxPinned()); err != nil {
		return err
	}
	for {
		i, ok := r.next()
		if !ok {
			break
		}
		use(i, r.out[i])
		s.Release(li, experts[i:i+1])
		r.out[i] = nil
		if err := r.reserve(1); err != nil {
			r.err = err
			break
		}
	}
	return r.drain()
}

// rolling is one Each call: experts[:reserved] have been reserved, hits
// lists the reserved cached ones not yet used, pending counts the misses
// being read (fed to the readers, landing on done), and out holds each
// pinned expert until it is used.
type rolling struct {
	s          *ExpertStore
	li         int
	experts    []int
	out        []*Expert
	reserved   int
	hits       []int
	pending    int
	feed, done chan *expertMiss
	err        error
}

// reserve pins the next n experts (fewer at the end), queueing the misses'
// reads.
func (r *rolling) reserve(n int) error {
	a, b := r.reserved, min(r.reserved+n, len(r.experts))
	if a >= b {
		return nil
	}
	misses, err := r.s.reserve(r.li, r.experts[a:b], r.out[a:b])
	if err != nil {
		return err
	}
	r.reserved = b
	for i := a; i < b; i++ {
		if r.out[i] != nil {
			r.hits = append(r.hits, i)
		}
	}
	r.s.io.urgentAdd(len(misses))
	r.pending += len(misses)
	for _, m := range misses {
		m.i += a
		r.feed <- m
	}
	return nil
}

// next is the index of an expert ready to use: a cached one, else the next
// read to land. ok is false when none is left or a read failed (r.err).
func (r *rolling) next() (i int, ok bool) {
	if len(r.hits) > 0 {
		i, r.hits = r.hits[0], r.hits[1:]
		return i, true
	}
	if r.pending == 0 || r.err != nil {
		return 0, false
	}
	t0 := time.Now()
	m := <-r.done
	r.pending--
	if r.err = r.s.settle(r.li, r.experts, []*expertMiss{m}, r.out, time.Since(t0).Seconds()); r.err != nil {
		return 0, false
	}
	return m.i, true
}

// drain waits for the reads still in flight after a failure, frees their
// slots and drops every pin left; it returns the first failure.
func (r *rolling) drain() error {
	for ; r.pending > 0; r.pending-- {
		t0 := time.Now()
		m := <-r.done
		if err := r.s.settle(r.li, r.experts, []*expertMiss{m}, r.out, time.Since(t0).Seconds()); r.err == nil {
			r.err = err
		}
	}
	r.s.Release(r.li, pinned(r.experts, r.out))
	return r.err
}

// pinned lists the experts that out holds.
func pinned(experts []int, out []*Expert) []int {
	var p []int
	for i, ex := range out {
		if ex != nil {
			p = append(p, experts[i])
		}
	}
	return p
}

// reserve pins the requested experts that are cached (into out) and
// reserves a slot for each of the others, evicting as the policy says; it
// returns the misses in disk-offset order.
func (s *ExpertStore) reserve(li int, experts []int, out []*Expert) ([]*expertMiss, error) {
	var misses []*expertMiss
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensurePolicy(); err != nil {
		return nil, err
	}
	// unwind drops what experts[:upto] took: a cached one's pin, and a
	// miss's reserved slot (not read: it leaves the index and the policy,
	// so no later request takes it for a loaded expert)
	unwind := func(upto int) {
		for j := 0; j < upto; j++ {
			key := li*s.cfg.Experts + experts[j]
			if out[j] != nil {
				s.unpin(key)
				continue
			}
			if sl, ok := s.index[key]; ok && sl.ex == nil {
				delete(s.index, key)
				s.pol.Remove(uint64(key))
				sl.pins, sl.key = 0, -1
				s.free = append(s.free, sl)
			}
		}
		for j := range out {
			out[j] = nil
		}
	}
	for i, e := range experts {
		key := li*s.cfg.Experts + e
		s.stats.Requests++
		if s.trace != nil {
			s.trace(li, e)
		}
		var loc *expertLoc
		if key >= 0 && key < len(s.locs) && s.locs[key].ok {
			loc = &s.locs[key]
		}
		if loc == nil {
			unwind(i)
			return nil, &ExpertError{li, e, "?", fmt.Errorf("expert was never located")}
		}
		ev := s.pol.Access(uint64(key))
		if ev.Hit {
			s.stats.Hits++
			sl := s.index[key]
			sl.pins++
			out[i] = sl.ex
			continue
		}
		s.stats.Misses++
		if ev.Evicted {
			v := s.index[int(ev.Victim)]
			delete(s.index, int(ev.Victim))
			v.key, v.ex = -1, nil
			s.free = append(s.free, v)
			s.stats.Evictions++
		}
		if !ev.Admitted {
			unwind(i)
			return nil, &ExpertError{li, e, s.path(loc), fmt.Errorf("expert cache: all %d slots are pinned", s.pol.Capacity())}
		}
		sl := s.takeSlot()
		sl.key, sl.pins, sl.ex = key, 1, nil
		s.index[key] = sl
		misses = append(misses, &expertMiss{i: i, sl: sl, loc: loc, key: key})
	}
	sort.Slice(misses, func(a, b int) bool {
		if pa, pb := s.path(misses[a].loc), s.path(misses[b].loc); pa != pb {
			return pa < pb
		}
		return misses[a].loc.off < misses[b].loc.off
	})
	return misses, nil
}

// settle counts the landed misses (wait: the seconds spent waiting for
// them) and frees the slots of the failed ones; out gets the loaded
// experts. It returns the first failure as an *ExpertError.
func (s *ExpertStore) settle(li int, experts []int, misses []*expertMiss, out []*Expert, wait float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ReadSeconds += wait
	var firstErr error
	for _, m := range misses {
		if m.err != nil {
			s.stats.Failures++
			delete(s.index, m.key)
			s.pol.Remove(uint64(m.key))
			m.sl.pins, m.sl.key = 0, -1
			s.free = append(s.free, m.sl)
			if firstErr == nil {
				firstErr = &ExpertError{li, experts[m.i], s.path(m.loc), m.err}
			}
			continue
		}
		s.stats.BytesRead += m.sl.ex.Bytes
		for _, mt := range []*kernels.Mat{&m.sl.ex.W1, &m.sl.ex.W3, &m.sl.ex.W2} {
			s.stats.NaNScaleGroups += int64(kernels.CountNaNScales(mt.Scales))
		}
		out[m.i] = m.sl.ex
	}
	return firstErr
}

// Release unpins experts acquired together.
func (s *ExpertStore) Release(li int, experts []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range experts {
		s.unpin(li*s.cfg.Experts + e)
	}
}

func (s *ExpertStore) unpin(key int) {
	sl, ok := s.index[key]
	if !ok || sl.pins == 0 {
		return
	}
	sl.pins--
}

// ensurePolicy builds the replacement policy at the budget's capacity.
// Called with s.mu held.
func (s *ExpertStore) ensurePolicy() error {
	if s.pol != nil {
		return nil
	}
	p, err := expertcache.New(s.policy, s.capacity(), max(s.bound, 1), s.cfg.Experts)
	if err != nil {
		return err
	}
	s.pol = p
	// pinned experts (handed to the batch in flight) are never evicted
	s.pol.SetEvictable(func(k uint64) bool {
		sl := s.index[int(k)]
		return sl != nil && sl.pins == 0
	})
	return nil
}

// takeSlot returns slot memory for an admitted expert: one an eviction (or
// a failed read) freed, else a new one of the arena. Called with s.mu held.
func (s *ExpertStore) takeSlot() *slot {
	if n := len(s.free); n > 0 {
		sl := s.free[n-1]
		s.free = s.free[:n-1]
		return sl
	}
	size := s.slotBytes()
	n := s.capacity()
	if s.arena == nil && s.heap == nil {
		if a, err := direct.AllocHuge(int(int64(n) * size)); err == nil {
			s.arena = a
		} else {
			s.heap = [][]byte{}
		}
	}
	var mem []byte
	if i := int64(len(s.slots)); s.arena != nil && i < int64(n) {
		mem = s.arena.Bytes()[i*size : (i+1)*size : (i+1)*size]
	} else {
		mem = make([]byte, size)
	}
	sl := &slot{mem: mem, key: -1}
	s.slots = append(s.slots, sl)
	return sl
}

// Close releases the store's files and slot memory.
func (s *ExpertStore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.Close()
	}
	s.files = map[string]*direct.File{}
	if s.arena != nil {
		s.arena.Free()
		s.arena = nil
	}
	s.slots, s.index, s.free = nil, map[int]*slot{}, nil
	if s.pol != nil {
		s.pol.Reset()
	}
}
