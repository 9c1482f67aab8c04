package engine

import (
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

// trunkStream hands out layers: pinned ones directly, streamed ones through
// a ring of slots. A reader goroutine fills slots in request order; after a
// layer is acquired the next streamed layers (cyclically, so the next token's
// first layers too) are read ahead into free slots while it computes.
type trunkStream struct {
	m        *Model
	tr       *trunk.Trunk
	streamed []int // streamed layer indices, ascending
	slots    []*ringSlot
	size     int64
	reads    chan *ringSlot
	done     chan struct{}

	mu       sync.Mutex
	bytes    int64
	wait     float64
	verified map[int]bool
}

type ringSlot struct {
	mem   []byte
	free  func()
	layer int // -1: empty
	ready chan struct{}
	err   error
	L     *Layer
	inUse bool
}

func newTrunkStream(m *Model, tr *trunk.Trunk, ring int, slotBytes int64) *trunkStream {
	s := &trunkStream{m: m, tr: tr, size: slotBytes, reads: make(chan *ringSlot, 64), done: make(chan struct{}), verified: map[int]bool{}}
	for i := 0; i < m.Bound; i++ {
		if m.layers[i] == nil {
			s.streamed = append(s.streamed, i)
			if r, ok := tr.LayerRun(i); ok && r.Length > s.size {
				s.size = r.Length // the plan's slot is a lower bound; never overrun
			}
		}
	}
	if len(s.streamed) > 0 {
		for i := 0; i < max(ring, 1); i++ {
			mem, free := runBuffer(s.size)
			s.slots = append(s.slots, &ringSlot{mem: mem, free: free, layer: -1})
		}
	}
	go s.reader()
	return s
}

// reader fills slots one at a time, in the order they were requested.
func (s *trunkStream) reader() {
	for {
		select {
		case sl := <-s.reads:
			s.mu.Lock()
			li := sl.layer
			first := !s.verified[li]
			s.mu.Unlock()
			r, _ := s.tr.LayerRun(li)
			var err error
			if first {
				err = s.tr.VerifyRun(r, sl.mem) // the first read of each layer is CRC-checked
			} else {
				err = s.tr.ReadRun(r, sl.mem)
			}
			s.mu.Lock()
			if err == nil {
				s.bytes += r.Length
				s.verified[li] = true
			}
			sl.err = err
			s.mu.Unlock()
			close(sl.ready)
		case <-s.done:
			return
		}
	}
}

// request starts reading layer li into a free slot; called with s.mu held.
// It returns nil when every slot is in use or holds a layer needed sooner.
func (s *trunkStream) request(li int, keep map[int]bool) *ringSlot {
	for _, sl := range s.slots {
		if sl.layer == li {
			return sl
		}
	}
	for _, sl := range s.slots {
		if sl.inUse || keep[sl.layer] {
			continue
		}
		if sl.layer >= 0 {
			select {
			case <-sl.ready:
			default:
				continue // a read into it is still in flight
			}
		}
		sl.layer, sl.L, sl.err, sl.ready = li, nil, nil, make(chan struct{})
		s.reads <- sl
		return sl
	}
	return nil
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
	sl := s.request(li, nil)
	for sl == nil { // every slot busy: wait for a read to finish
		s.mu.Unlock()
		time.Sleep(50 * time.Microsecond)
		s.mu.Lock()
		sl = s.request(li, nil)
	}
	sl.inUse = true
	ahead := s.upcoming(li, len(s.slots)-1)
	keep := map[int]bool{li: true}
	for _, n := range ahead {
		keep[n] = true
	}
	for _, n := range ahead {
		s.request(n, keep)
	}
	ready := sl.ready
	s.mu.Unlock()
	<-ready
	s.mu.Lock()
	s.wait += time.Since(t0).Seconds()
	err := sl.err
	s.mu.Unlock()
	if err != nil {
		s.release(li)
		return nil, err
	}
	if sl.L == nil {
		r, _ := s.tr.LayerRun(li)
		b := &binder{src: runSource{r, sl.mem}, cfg: s.m.Cfg, prefix: s.m.Prefix}
		L := b.layer(li)
		if err := b.err(); err != nil {
			s.release(li)
			return nil, err
		}
		sl.L = L
	}
	return sl.L, nil
}

func (s *trunkStream) release(li int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.slots {
		if sl.layer == li {
			sl.inUse = false
		}
	}
}

func (s *trunkStream) trunkStats() (int64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.wait
}

func (s *trunkStream) close() {
	// let reads in flight finish before the slot memory goes away
	s.mu.Lock()
	slots := s.slots
	s.mu.Unlock()
	for _, sl := range slots {
		if sl.layer >= 0 {
			<-sl.ready
		}
	}
	close(s.done)
	for _, sl := range slots {
		sl.free()
	}
	s.slots = nil
}
