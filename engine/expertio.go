package engine

// The expert store's file I/O: where each routed expert lies in the shards
// (locate), the shard files opened for direct I/O (file, readDirect), and
// the reads of the missed experts into their slots (read, load). The cache
// itself (slots, pins, the replacement policy) is experts.go.

import (
	"fmt"
	"sort"
	"strings"

	"k3/kernels"
	"k3/storage/config"
	"k3/storage/direct"
	"k3/storage/layout"
	st "k3/storage/safetensors"
)

// expertLoc is where an expert's six tensors lie in the shards: one
// contiguous run (the released layout) or six separate reads. It holds
// offsets and file indexes only (88 bytes an expert, TestExpertLocSize):
// the parts' sizes follow from the config (expertPartSizes) and the set
// forgets the routed experts' entries once they are located.
type expertLoc struct {
	parts [6]int64 // each part's offset: w1 packed, w1 scale, w3 packed, w3 scale, w2 packed, w2 scale
	files [6]int32 // each part's file: an index into ExpertStore.paths
	off   int64    // start of the contiguous run, when contiguous
	run   bool
	ok    bool // located
}

// expertPartSizes are the bytes of an expert's six parts, in expertLoc's
// order.
func expertPartSizes(c *config.Config) [6]int64 {
	var out [6]int64
	for i, sh := range expertShapes(c) {
		out[i] = int64(sh[0]) * int64(sh[1])
	}
	return out
}

// expertShapes are the shapes of an expert's six U8 parts.
func expertShapes(c *config.Config) [6][2]int {
	return [6][2]int{
		{c.MoEInter, c.Latent / 2}, {c.MoEInter, c.Latent / 32},
		{c.MoEInter, c.Latent / 2}, {c.MoEInter, c.Latent / 32},
		{c.Latent, c.MoEInter / 2}, {c.Latent, c.MoEInter / 32},
	}
}

// path is the file of loc's first part (of all of them, when a run).
func (s *ExpertStore) path(loc *expertLoc) string { return s.paths[loc.files[0]] }

// file returns the open shard at path, opening it (O_DIRECT where
// possible) on first use.
func (s *ExpertStore) file(path string) (*direct.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.files[path]; ok {
		return f, nil
	}
	f, err := direct.Open(path)
	if err != nil {
		return nil, err
	}
	s.files[path] = f
	return f, nil
}

// readDirect reads with O_DIRECT when dst and off allow it (the slot layout
// makes that the common case) and through a bounce buffer otherwise.
func (s *ExpertStore) readDirect(path string, off int64, dst []byte) error {
	f, err := s.file(path)
	if err != nil {
		return err
	}
	_, err = f.ReadAt(dst, off)
	return err
}

// locateAll locates every routed expert of the bound MoE layers; one error
// lists every problem.
func (s *ExpertStore) locateAll(prefix string) error {
	var errs []string
	for li := 0; li < s.bound; li++ {
		if s.cfg.IsDense(li) {
			continue
		}
		for e := 0; e < s.cfg.Experts; e++ {
			if msg := s.locate(prefix, li, e); msg != "" {
				errs = append(errs, msg)
			}
		}
	}
	if len(errs) > 0 {
		return &BindError{errs}
	}
	return nil
}

// forgetLocated drops the routed experts' entries from the set's index:
// the store holds where they lie (expertLoc), so the index is not held
// twice (doctor.TensorIndexBytes counts what stays).
func (s *ExpertStore) forgetLocated(prefix string) {
	s.set.Forget(func(name string) bool {
		n, ok := strings.CutPrefix(name, prefix)
		return ok && layout.IsRoutedExpert(n)
	})
}

// locate checks the six tensors of expert e of layer li and records where
// they are; it returns a problem description or "".
func (s *ExpertStore) locate(prefix string, li, e int) string {
	shapes := expertShapes(s.cfg)
	base := fmt.Sprintf("%smodel.layers.%d.block_sparse_moe.experts.%d.", prefix, li, e)
	names := [6]string{"w1.weight_packed", "w1.weight_scale", "w3.weight_packed", "w3.weight_scale", "w2.weight_packed", "w2.weight_scale"}
	var loc expertLoc
	var lo, hi, sum int64
	loc.run = true
	for i, n := range names {
		t, ok := s.set.Get(base + n)
		if !ok {
			return fmt.Sprintf("missing tensor %s%s (expected U8 %v)", base, n, shapes[i])
		}
		if t.DType != st.U8 || !shapeEq(t.Shape, shapes[i][:]) {
			return fmt.Sprintf("tensor %s%s is %s%v, expected U8 %v", base, n, t.DType, t.Shape, shapes[i])
		}
		fi, ok := s.fileIndex[t.Path]
		if !ok {
			return fmt.Sprintf("tensor %s%s: file %s is not part of the set", base, n, t.Path)
		}
		loc.parts[i], loc.files[i] = t.Offset, fi
		if i == 0 {
			lo = t.Offset
		}
		lo = min(lo, t.Offset)
		hi = max(hi, t.Offset+t.Size)
		sum += t.Size
		loc.run = loc.run && fi == loc.files[0]
	}
	loc.run = loc.run && hi-lo == sum
	loc.off, loc.ok = lo, true
	s.locs[li*s.cfg.Experts+e] = loc
	return ""
}

// expertMiss is an expert being read into a reserved slot.
type expertMiss struct {
	i   int // index in the request
	sl  *slot
	loc *expertLoc
	key int
	err error
}

// read loads the misses in order, queueDepth at a time, and sends each on
// done when its read has finished.
func (s *ExpertStore) read(misses []*expertMiss, done chan<- *expertMiss) {
	next := s.readers(len(misses), done)
	s.io.urgentAdd(len(misses))
	for _, m := range misses {
		next <- m
	}
	close(next)
}

// readers starts the readers of up to n misses, queueDepth at once: each
// miss sent on the channel returned (buffered for n, so sending never
// waits) is loaded into its slot and sent on done, which must have room
// for all n. Close the channel to end them; the caller counts the misses
// it sends as urgent reads (ioTracker.urgentAdd), the readers count them
// finished.
func (s *ExpertStore) readers(n int, done chan<- *expertMiss) chan *expertMiss {
	next := make(chan *expertMiss, n)
	for w := 0; w < max(1, min(s.queueDepth, n)); w++ {
		go func() {
			for m := range next {
				s.io.begin()
				m.sl.ex, m.err = s.load(m.loc, m.sl.mem)
				s.io.end()
				s.io.urgentAdd(-1)
				done <- m
			}
		}()
	}
	return next
}

// load reads an expert's run into slot memory: the 4096-aligned span that
// covers it, so the read can go straight from the device.
func (s *ExpertStore) load(loc *expertLoc, mem []byte) (*Expert, error) {
	parts := make([][]byte, 6)
	size := s.expertBytes()
	if loc.run {
		path := s.path(loc)
		start := direct.AlignDown(loc.off)
		end := direct.AlignUp(loc.off + size)
		if fsize := s.fileSize(path); fsize > 0 && end > fsize {
			end = loc.off + size // the last run of a file: no padding after it
			start = loc.off
		}
		span := mem[:end-start]
		if err := s.readAt(path, start, span); err != nil {
			return nil, err
		}
		base := loc.off - start
		for i, n := range s.partSizes {
			o := base + loc.parts[i] - loc.off
			parts[i] = span[o : o+n]
		}
	} else {
		o := int64(0)
		for i, n := range s.partSizes {
			parts[i] = mem[o : o+n]
			if err := s.readAt(s.paths[loc.files[i]], loc.parts[i], parts[i]); err != nil {
				return nil, err
			}
			o += n
		}
	}
	c := s.cfg
	ex := &Expert{Bytes: size}
	ex.W1 = kernels.Mat{DType: kernels.MXFP4, Rows: c.MoEInter, Cols: c.Latent, Packed: parts[0], Scales: parts[1]}
	ex.W3 = kernels.Mat{DType: kernels.MXFP4, Rows: c.MoEInter, Cols: c.Latent, Packed: parts[2], Scales: parts[3]}
	ex.W2 = kernels.Mat{DType: kernels.MXFP4, Rows: c.Latent, Cols: c.MoEInter, Packed: parts[4], Scales: parts[5]}
	return ex, nil
}

// fileSize is the size of the shard at path (-1: unknown).
func (s *ExpertStore) fileSize(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sizes == nil {
		s.sizes = map[string]int64{}
		for _, f := range s.set.Files() {
			s.sizes[f.Path] = f.Size
		}
	}
	if n, ok := s.sizes[path]; ok {
		return n
	}
	return -1
}

// IONotes lists the shard files read through the page cache, and why.
func (s *ExpertStore) IONotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var notes []string
	for path, f := range s.files {
		if !f.Direct() {
			notes = append(notes, fmt.Sprintf("%s: %s", path, f.Note()))
		}
	}
	sort.Strings(notes)
	return notes
}

// expertBytes is the bytes of one expert's six parts.
func (s *ExpertStore) expertBytes() int64 {
	var n int64
	for _, b := range s.partSizes {
		n += b
	}
	return n
}
