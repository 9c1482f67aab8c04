package engine

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"k3/storage/direct"
	"k3/storage/trunk"
)

// layerProvider hands out layers for one forward step: resident layers, or
// layers streamed from a packed trunk into a ring of slots.
type layerProvider interface {
	acquire(li int) (*Layer, error)
	release(li int)
	trunkStats() (bytes int64, waitSeconds float64)
	close()
}

// residentLayers are every layer bound in memory.
type residentLayers []*Layer

func (r residentLayers) acquire(li int) (*Layer, error) { return r[li], nil }
func (residentLayers) release(int)                      {}
func (residentLayers) trunkStats() (int64, float64)     { return 0, 0 }
func (residentLayers) close()                           {}

// runBuffer allocates memory for a run: huge pages when possible (so O_DIRECT
// reads go straight in), else an 8-byte aligned heap slice. release frees it.
func runBuffer(n int64) (mem []byte, release func()) {
	if b, err := direct.AllocHuge(int(n)); err == nil {
		return b.Bytes(), func() { b.Free() }
	}
	return alignedBytes(n), func() {}
}

// trunkStream hands out layers: pinned ones directly, streamed ones
// through the ring, one buffer that streamed layers are read into one
// after another (each where the previous one ended, wrapping to the start),
// the oldest dropped to make room. A reader goroutine reads them in request
// order; after a layer is acquired the next streamed layers (cyclically, so
// the next token's first layers too) are read ahead while it computes, as
// many as the ring holds and at most ahead of them.
type trunkStream struct {
	m        *Model
	tr       *trunk.Trunk
	streamed []int // streamed layer indices, ascending
	ring     []byte
	free     func()
	ahead    int // layers read ahead of the one computing
	reads    chan *ringSlot
	done     chan struct{}

	mu       sync.Mutex
	changed  *sync.Cond  // a read finished or a layer was released
	held     []*ringSlot // layers in the ring, oldest first
	bytes    int64
	wait     float64
	verified map[int]bool
}

// ringSlot is one layer's span of the ring.
type ringSlot struct {
	off, size int64
	layer     int
	ready     chan struct{} // closed once read and bound
	err       error
	L         *Layer
	inUse     bool
}

func (sl *ringSlot) landed() bool {
	select {
	case <-sl.ready:
		return true
	default:
		return false
	}
}

// newTrunkStream makes the ring: ringBytes (at least the largest streamed
// layer), with up to slots layers in flight.
func newTrunkStream(m *Model, tr *trunk.Trunk, slots int, ringBytes int64) *trunkStream {
	s := &trunkStream{m: m, tr: tr, ahead: max(slots, 1) - 1, reads: make(chan *ringSlot, 64), done: make(chan struct{}), verified: map[int]bool{}}
	s.changed = sync.NewCond(&s.mu)
	for i := 0; i < m.Bound; i++ {
		if m.layers[i] == nil {
			s.streamed = append(s.streamed, i)
			if r, ok := tr.LayerRun(i); ok && r.Length > ringBytes {
				ringBytes = r.Length // the plan's ring is a lower bound; never overrun
			}
		}
	}
	if len(s.streamed) > 0 {
		// runs are whole pages long, so spans placed at the ring's end
		// start on a page too (O_DIRECT reads straight into them)
		s.ring, s.free = runBuffer(ringBytes)
		s.ring = s.ring[:direct.AlignDown(ringBytes)]
	}
	go s.reader()
	return s
}

// reader reads layers one at a time, in the order they were requested.
// Each layer read is bound in a goroutine of its own (binding a compressed
// layer checks every row's headers, tens of milliseconds at the released
// size), so the next read starts at once and the compute thread finds the
// layer bound; its slot is ready once bound.
func (s *trunkStream) reader() {
	for {
		select {
		case sl := <-s.reads:
			s.mu.Lock()
			li := sl.layer
			first := !s.verified[li]
			s.mu.Unlock()
			r, _ := s.tr.LayerRun(li)
			mem := s.ring[sl.off : sl.off+sl.size]
			var err error
			s.m.io.begin()
			if first {
				err = s.tr.VerifyRun(r, mem) // the first read of each layer is CRC-checked
			} else {
				err = s.tr.ReadRun(r, mem)
			}
			s.m.io.end()
			s.mu.Lock()
			if err == nil {
				s.bytes += r.Length
				s.verified[li] = true
			}
			s.mu.Unlock()
			if err != nil {
				s.land(sl, nil, err)
				continue
			}
			go func() {
				b := &binder{src: runSource{r, mem}, cfg: s.m.Cfg, prefix: s.m.Prefix}
				L := b.layer(li)
				s.land(sl, L, b.err())
			}()
		case <-s.done:
			return
		}
	}
}

// land marks slot sl read and bound (L) or failed (err).
func (s *trunkStream) land(sl *ringSlot, L *Layer, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl.L, sl.err = L, err
	close(sl.ready)
	s.changed.Broadcast()
}

// place finds room for size bytes in the ring, or returns -1. Of the
// free gaps' two ends that fit, it takes the one that leaves the largest
// gap once the oldest layer (the next to go) is dropped: with two layers
// in flight that puts them at opposite ends, so any two that fit together
// are read together.
func (s *trunkStream) place(size int64) int64 {
	if len(s.held) == 0 {
		return 0
	}
	spans := make([][2]int64, 0, len(s.held)+1)
	for _, h := range s.held {
		spans = append(spans, [2]int64{h.off, h.size})
	}
	best, bestGap := int64(-1), int64(-1)
	for _, g := range gaps(spans, int64(len(s.ring))) {
		if g[1]-g[0] < size {
			continue
		}
		for _, off := range []int64{g[0], g[1] - size} {
			after := append(spans[1:len(spans):len(spans)], [2]int64{off, size})
			largest := int64(0)
			for _, a := range gaps(after, int64(len(s.ring))) {
				largest = max(largest, a[1]-a[0])
			}
			if largest > bestGap {
				best, bestGap = off, largest
			}
		}
	}
	return best
}

// gaps are the free [start, end) stretches of a ring of n bytes around
// spans (offset, size).
func gaps(spans [][2]int64, n int64) [][2]int64 {
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	pos := int64(0)
	for _, sp := range sorted {
		if sp[0] > pos {
			out = append(out, [2]int64{pos, sp[0]})
		}
		pos = max(pos, sp[0]+sp[1])
	}
	if pos < n {
		out = append(out, [2]int64{pos, n})
	}
	return out
}

// request starts reading layer li into the ring, dropping the oldest
// layers that are not in use, not being read and not in keep to make room;
// called with s.mu held. It returns nil when there is no room now.
func (s *trunkStream) request(li int, keep map[int]bool) *ringSlot {
	for _, sl := range s.held {
		if sl.layer == li {
			return sl
		}
	}
	r, _ := s.tr.LayerRun(li)
	for {
		if off := s.place(r.Length); off >= 0 {
			sl := &ringSlot{off: off, size: r.Length, layer: li, ready: make(chan struct{})}
			s.held = append(s.held, sl)
			s.reads <- sl
			return sl
		}
		old := s.held[0]
		if old.inUse || keep[old.layer] || !old.landed() {
			return nil
		}
		s.held = s.held[1:]
	}
}

// upcoming lists the streamed layers after li in cyclic order (at most n).
func (s *trunkStream) upcoming(li, n int) []int {
	var out []int
	k := 0
	for k < len(s.streamed) && s.streamed[k] <= li {
		k++
	}
	for i := 0; i < n && i < len(s.streamed); i++ {
		out = append(out, s.streamed[(k+i)%len(s.streamed)])
	}
	return out
}

func (s *trunkStream) acquire(li int) (*Layer, error) {
	if L := s.m.layers[li]; L != nil {
		return L, nil
	}
	t0 := time.Now()
	s.mu.Lock()
	keep := map[int]bool{li: true}
	sl := s.request(li, keep)
	for sl == nil { // the ring is full of layers being read or in use: wait for one
		s.changed.Wait()
		sl = s.request(li, keep)
	}
	sl.inUse = true
	ahead := s.upcoming(li, s.ahead)
	for _, n := range ahead {
		keep[n] = true
	}
	for _, n := range ahead {
		if s.request(n, keep) == nil {
			break // read ahead in order only
		}
	}
	for !sl.landed() {
		s.changed.Wait()
	}
	s.wait += time.Since(t0).Seconds()
	err := sl.err
	s.mu.Unlock()
	if err != nil {
		s.drop(sl)
		return nil, err
	}
	return sl.L, nil
}

// drop releases a layer whose read or binding failed and forgets it, so
// the next request reads it again.
func (s *trunkStream) drop(sl *ringSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl.inUse = false
	for i, h := range s.held {
		if h == sl && i == 0 {
			s.held = s.held[1:]
		} else if h == sl {
			sl.layer = -1 // keeps its span until it is the oldest
		}
	}
	s.changed.Broadcast()
}

func (s *trunkStream) release(li int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.held {
		if sl.layer == li {
			sl.inUse = false
		}
	}
	s.changed.Broadcast()
}

func (s *trunkStream) trunkStats() (int64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.wait
}

func (s *trunkStream) close() {
	// let reads in flight finish before the ring goes away
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	for _, sl := range held {
		<-sl.ready
	}
	close(s.done)
	if s.free != nil {
		s.free()
	}
}
