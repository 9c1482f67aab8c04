package engine

import (
	"fmt"
	"sync"
	"time"

	"k3/engine/plan"
	"k3/storage/config"
	"k3/storage/direct"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// runSource binds tensors aliased in place from one packed-trunk run in memory.
type runSource struct {
	run *trunk.Run
	mem []byte
}

func (r runSource) get(name string) (*st.Tensor, bool) {
	t, ok := r.run.Tensor(name)
	if !ok {
		return nil, false
	}
	return &st.Tensor{Name: t.Name, DType: st.DType(t.DType), Shape: t.Shape, Offset: t.Offset, Size: t.Size}, true
}

func (r runSource) data(t *st.Tensor) ([]byte, error) {
	return r.mem[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
}

// runBuffer allocates memory for a run: huge pages when possible (so O_DIRECT
// reads go straight in), else an 8-byte aligned heap slice.
func runBuffer(n int64) ([]byte, *direct.Buffer) {
	if b, err := direct.AllocHuge(int(n)); err == nil {
		return b.Bytes(), b
	}
	w := make([]uint64, (n+7)/8)
	return u64bytes(w)[:n], nil
}

// bindStreaming binds a model whose trunk comes from a packed trunk: the
// model tables and the layers the plan pins are read (and CRC-checked) now;
// the other layers are streamed through a ring of slots while decoding.
func bindStreaming(set *st.Set, cfg *config.Config, layers int, modelDir, dir string, p *plan.Plan, ultra bool, progress func(done, total int)) (*Model, error) {
	tr, err := trunk.Open(dir)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Model, error) {
		tr.Close()
		return nil, err
	}
	if err := tr.CheckSource(modelDir); err != nil {
		return fail(err)
	}
	if tr.Layers() < layers {
		return fail(fmt.Errorf("trunk %s has %d layers, the model needs %d", dir, tr.Layers(), layers))
	}
	prefix := tr.Manifest().Source.Prefix
	m := &Model{Cfg: cfg, Prefix: prefix, Bound: layers, Layers: make([]*Layer, layers), trunk: tr}
	load := func(r *trunk.Run) ([]byte, error) {
		mem, buf := runBuffer(r.Length)
		if buf != nil {
			m.buffers = append(m.buffers, buf)
		}
		if err := tr.VerifyRun(r, mem); err != nil {
			return nil, err
		}
		m.TrunkBytes += r.Length
		return mem, nil
	}
	var errs []string
	for _, name := range []string{trunk.RunEmbed, trunk.RunHead, trunk.RunFinal} {
		r, ok := tr.Run(name)
		if !ok {
			return fail(fmt.Errorf("trunk %s has no %q run", dir, name))
		}
		if ultra && (name == trunk.RunEmbed || name == trunk.RunHead) {
			if err := m.setUltra(tr, name, r); err != nil {
				m.Close()
				return nil, err
			}
			continue
		}
		mem, err := load(r)
		if err != nil {
			m.Close()
			return nil, err
		}
		b := &binder{src: runSource{r, mem}, cfg: cfg, prefix: prefix}
		H := cfg.Hidden
		switch name {
		case trunk.RunEmbed:
			m.Embed = b.mat("model.embed_tokens.weight", cfg.VocabSize, H)
		case trunk.RunHead:
			m.LMHead = b.mat("lm_head.weight", cfg.VocabSize, H)
		case trunk.RunFinal:
			m.FinalNorm = b.vec("model.norm.weight", []int{H}, 0)
			m.OutFold = b.fold("model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", H)
		}
		errs = append(errs, b.errs...)
	}
	if cfg.TieEmbeddings && !ultra {
		m.LMHead = m.Embed
	}
	m.Store = newExpertStore(set, cfg)
	m.Store.bound = layers
	m.Experts = m.Store
	for i := 0; i < layers; i++ {
		r, _ := tr.LayerRun(i)
		if p.Pinned[i] {
			mem, err := load(r)
			if err != nil {
				m.Close()
				return nil, err
			}
			b := &binder{src: runSource{r, mem}, cfg: cfg, prefix: prefix}
			m.Layers[i] = b.layer(i, nil)
			errs = append(errs, b.errs...)
		}
		if !cfg.IsDense(i) {
			for e := 0; e < cfg.Experts; e++ {
				if msg := m.Store.locate(prefix, i, e); msg != "" {
					errs = append(errs, msg)
				}
			}
		}
		if progress != nil {
			progress(i+1, layers)
		}
	}
	if len(errs) > 0 {
		m.Close()
		return nil, &BindError{errs}
	}
	ring, slot := p.RingSlots, p.SlotBytes
	m.stream = func(e *Engine) (layerProvider, error) { return newTrunkStream(m, tr, ring, slot), nil }
	return m, nil
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
	buf   *direct.Buffer
	layer int // -1: empty
	ready chan struct{}
	err   error
	L     *Layer
	inUse bool
}

func newTrunkStream(m *Model, tr *trunk.Trunk, ring int, slotBytes int64) *trunkStream {
	s := &trunkStream{m: m, tr: tr, size: slotBytes, reads: make(chan *ringSlot, 64), done: make(chan struct{}), verified: map[int]bool{}}
	for i := 0; i < m.Bound; i++ {
		if m.Layers[i] == nil {
			s.streamed = append(s.streamed, i)
			if r, ok := tr.LayerRun(i); ok && r.Length > s.size {
				s.size = r.Length // the plan's slot is a lower bound; never overrun
			}
		}
	}
	if len(s.streamed) > 0 {
		for i := 0; i < max(ring, 1); i++ {
			mem, buf := runBuffer(s.size)
			s.slots = append(s.slots, &ringSlot{mem: mem, buf: buf, layer: -1})
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
	if L := s.m.Layers[li]; L != nil {
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
		L := b.layer(li, nil)
		if len(b.errs) > 0 {
			s.release(li)
			return nil, &BindError{b.errs}
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
		if sl.buf != nil {
			sl.buf.Free()
		}
	}
	s.slots = nil
}
