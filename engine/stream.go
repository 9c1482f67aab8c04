package engine

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"k3/storage/direct"
	"k3/storage/layout"
	"k3/storage/trunk"
)

// layerProvider hands out layers for one forward step: resident layers, or
// layers streamed from a packed trunk into a ring of slots.
type layerProvider interface {
	acquire(li int) (*Layer, error)
	// trim says layer li, acquired, has run its attention: from here on it
	// reads only its MLP's weights.
	trim(li int)
	release(li int)
	trunkStats() (bytes int64, waitSeconds, readSeconds float64)
	close()
}

// residentLayers are every layer bound in memory.
type residentLayers []*Layer

func (r residentLayers) acquire(li int) (*Layer, error)      { return r[li], nil }
func (residentLayers) trim(int)                              {}
func (residentLayers) release(int)                           {}
func (residentLayers) trunkStats() (int64, float64, float64) { return 0, 0, 0 }
func (residentLayers) close()                                {}

// runBuffer allocates memory for a run: huge pages when possible (so O_DIRECT
// reads go straight in), else an 8-byte aligned heap slice. release frees it.
func runBuffer(n int64) (mem []byte, release func()) {
	if b, err := direct.AllocHuge(int(n)); err == nil {
		return b.Bytes(), func() { b.Free() }
	}
	return alignedBytes(n), func() {}
}

// trunkStream hands out layers: pinned ones directly, streamed ones
// through the ring, one buffer that streamed layers are read into, the
// oldest dropped to make room. A layer is read in two parts, its attention
// (the run up to its MLP's first tensor) and its MLP (the rest), each where
// it fits, so the attention part can be given back as soon as attention has
// run (trim). A reader goroutine reads layers in request order; the next
// streamed layers (cyclically, so the next token's first layers too) are
// read ahead while one computes, as many as the ring holds and at most
// ahead+1 after it.
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
	readSecs float64 // time the ring's reads took, device time (overlapped with compute or not)
	verified map[int]bool
	split    map[int]int64 // streamed layer -> offset in its run of its MLP's first tensor (0: one part)
}

// trunkPiece is the size of the reads a streamed layer is read in: between
// them the reader lets the computing layer's expert reads go first.
const trunkPiece = 64 << 20

// ringSlot is one layer in the ring.
type ringSlot struct {
	parts []ringPart // where the layer's run is: attention part then MLP part, or one part
	layer int
	ready chan struct{} // closed once read and bound
	err   error
	L     *Layer
	inUse bool
	// trimmed: the attention part was given back (trim), so the slot no
	// longer holds the whole layer and is not handed out again
	trimmed bool
}

// ringPart is a stretch of the ring, off..off+size, holding the run's
// bytes from..from+size.
type ringPart struct{ off, size, from int64 }

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
	s := &trunkStream{m: m, tr: tr, ahead: max(slots, 1) - 1, reads: make(chan *ringSlot, 64), done: make(chan struct{}),
		verified: map[int]bool{}, split: map[int]int64{}}
	s.changed = sync.NewCond(&s.mu)
	for i := 0; i < m.Bound; i++ {
		if m.layers[i] == nil {
			s.streamed = append(s.streamed, i)
			r, ok := tr.LayerRun(i)
			if !ok {
				continue
			}
			s.split[i] = mlpStart(r, m.Prefix, i)
			need := int64(0)
			for _, p := range s.partsOf(i) {
				need += p.size
			}
			ringBytes = max(ringBytes, need) // the plan's ring is a lower bound; never overrun
		}
	}
	if len(s.streamed) > 0 {
		// parts are whole pages long, so parts placed at the ring's end
		// start on a page too (O_DIRECT reads straight into them)
		s.ring, s.free = runBuffer(ringBytes)
		s.ring = s.ring[:direct.AlignDown(ringBytes)]
	}
	go s.reader()
	return s
}

// mlpStart is the offset in run r of layer li's first MLP tensor (dense
// mlp.* or block_sparse_moe.*), or 0 when the run has no such tensor or
// nothing before it.
func mlpStart(r *trunk.Run, prefix string, li int) int64 {
	dense, moe := prefix+layout.Layer(li)+layout.DenseMLP, prefix+layout.Layer(li)+layout.MoE
	at := int64(-1)
	for _, t := range r.Tensors {
		if (strings.HasPrefix(t.Name, dense) || strings.HasPrefix(t.Name, moe)) && (at < 0 || t.Offset < at) {
			at = t.Offset
		}
	}
	return max(at, 0)
}

// partsOf is where layer li's run is cut: [0, AlignUp(split)) and
// [AlignDown(split), Length), so every tensor lies whole in one part (the
// attention's before the split, the MLP's after it) and the parts share at
// most a page; one part when the MLP starts on the first or last page.
func (s *trunkStream) partsOf(li int) []ringPart {
	r, _ := s.tr.LayerRun(li)
	at := s.split[li]
	lo, hi := direct.AlignDown(at), direct.AlignUp(at)
	if lo == 0 || hi >= r.Length {
		return []ringPart{{size: r.Length}}
	}
	return []ringPart{{size: hi}, {from: lo, size: r.Length - lo}}
}

// reader reads layers one at a time, in the order they were requested.
// Each layer read is bound in a goroutine of its own (binding a compressed
// layer checks every row's headers, tens of milliseconds at the released
// size), so the next read starts at once and the compute thread finds the
// layer bound; its slot is ready once bound. Reads go in pieces, letting
// the computing layer's expert reads go first between them.
func (s *trunkStream) reader() {
	for {
		select {
		case sl := <-s.reads:
			s.mu.Lock()
			li := sl.layer
			first := !s.verified[li]
			s.mu.Unlock()
			r, _ := s.tr.LayerRun(li)
			parts := make([]trunk.RunPart, len(sl.parts))
			for i, p := range sl.parts {
				parts[i] = trunk.RunPart{From: p.from, Dst: s.ring[p.off : p.off+p.size : p.off+p.size]}
			}
			s.m.io.begin()
			t0 := time.Now()
			// the first read of each layer is CRC-checked
			err := s.tr.ReadRunParts(r, parts, first, trunkPiece, s.m.io.yield)
			took := time.Since(t0).Seconds()
			s.m.io.end()
			s.mu.Lock()
			if err == nil {
				s.bytes += r.Length
				s.readSecs += took
				s.verified[li] = true
			}
			s.mu.Unlock()
			if err != nil {
				s.land(sl, nil, err)
				continue
			}
			go func() {
				b := &binder{src: runSource{r, parts}, cfg: s.m.Cfg, prefix: s.m.Prefix}
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

// place finds room for parts of the given sizes in the ring, or returns
// nil. For each part, the largest first (a small part could take the one
// gap a large one fits), of the free gaps' two ends that fit, it takes
// the one that leaves the largest gap once the oldest layer (the next to
// go) is dropped: with two layers in flight that puts them at opposite
// ends, so any two that fit together are read together.
func (s *trunkStream) place(sizes []int64) []int64 {
	var spans [][2]int64 // every held part, the oldest layer's first
	oldest := 0
	for i, h := range s.held {
		for _, p := range h.parts {
			spans = append(spans, [2]int64{p.off, p.size})
			if i == 0 {
				oldest++
			}
		}
	}
	offs := make([]int64, len(sizes))
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	for _, k := range order {
		size := sizes[k]
		best, bestGap := int64(-1), int64(-1)
		for _, g := range gaps(spans, int64(len(s.ring))) {
			if g[1]-g[0] < size {
				continue
			}
			for _, off := range []int64{g[0], g[1] - size} {
				after := append(spans[oldest:len(spans):len(spans)], [2]int64{off, size})
				largest := int64(0)
				for _, a := range gaps(after, int64(len(s.ring))) {
					largest = max(largest, a[1]-a[0])
				}
				if largest > bestGap {
					best, bestGap = off, largest
				}
			}
		}
		if best < 0 {
			return nil
		}
		offs[k] = best
		spans = append(spans, [2]int64{best, size})
	}
	return offs
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
		if sl.layer == li && !sl.trimmed {
			return sl
		}
	}
	parts := s.partsOf(li)
	sizes := make([]int64, len(parts))
	for i, p := range parts {
		sizes[i] = p.size
	}
	for {
		if offs := s.place(sizes); offs != nil {
			for i := range parts {
				parts[i].off = offs[i]
			}
			sl := &ringSlot{parts: parts, layer: li, ready: make(chan struct{})}
			s.held = append(s.held, sl)
			s.reads <- sl
			return sl
		}
		if len(s.held) == 0 {
			return nil // cannot happen: the ring holds every layer's parts
		}
		old := s.held[0]
		if old.inUse || (keep[old.layer] && !old.trimmed) || !old.landed() {
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

// trim gives back acquired layer li's attention part and, with the room
// that makes, reads ahead: the next layers are read while this one's MLP
// (its expert reads included) runs, not only after it. It keeps the part
// unless the layer's MLP matrices all lie in its MLP part (Layer.MLPFrom).
func (s *trunkStream) trim(li int) {
	if s.m.layers[li] != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.held {
		if sl.layer == li && sl.inUse && !sl.trimmed && len(sl.parts) == 2 && sl.L != nil && sl.L.MLPFrom >= sl.parts[1].from {
			sl.parts = sl.parts[1:]
			sl.trimmed = true
			s.readAhead(li)
			s.changed.Broadcast()
			return
		}
	}
}

// release frees layer li's slot and, with the room that makes, starts
// reading the next streamed layers at once: the read-ahead an acquire asks
// for (the layers after the one it hands out), asked for here already, so
// the disk does not idle while the compute between two streamed layers runs
// (pinned layers, or the output head and the next token's embedding after
// the last layer).
func (s *trunkStream) release(li int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sl := range s.held {
		if sl.layer == li {
			sl.inUse = false
		}
	}
	s.readAhead(li)
	s.changed.Broadcast()
}

// readAhead requests, in order, the streamed layers after li that the ring
// has room for: the next one and the read-ahead after it. Called with s.mu
// held, when li is done with all or part of its slot.
func (s *trunkStream) readAhead(li int) {
	if len(s.streamed) == 0 {
		return
	}
	next := s.upcoming(li, s.ahead+1)
	keep := map[int]bool{}
	for _, n := range next {
		keep[n] = true
	}
	for _, n := range next {
		if s.request(n, keep) == nil {
			break
		}
	}
}

func (s *trunkStream) trunkStats() (int64, float64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.wait, s.readSecs
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
