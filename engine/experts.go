package engine

import (
	"container/list"
	"fmt"
	"os"
	"sync"
	"time"

	"k3/kernels"
	"k3/storage/config"
	st "k3/storage/safetensors"
)

// ExpertSource supplies routed experts by (layer, expert). A failed load must
// return an error (an *ExpertError names the expert and the file).
type ExpertSource interface {
	Get(layer, expert int) (*Expert, error)
}

// Expert is one routed expert's matrices (MXFP4 in the released checkpoint): W1 (gate) and W3 (up) map the
// latent to the intermediate width, W2 (down) maps back.
type Expert struct {
	W1, W3, W2 kernels.Mat
	Bytes      int64
}

type expertLoc struct {
	parts [6]*st.Tensor // w1 packed, w1 scale, w3 packed, w3 scale, w2 packed, w2 scale
	path  string
	off   int64 // start of the contiguous run, when contiguous
	size  int64
	run   bool
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
	Requests, Hits, Misses, Evictions int64
	BytesRead                         int64
	ReadSeconds                       float64
	NaNScaleGroups                    int64 // E8M0 scale bytes equal to 255 seen in loaded experts
	Failures                          int64
}

// ExpertStore locates routed experts in the shards and keeps recently used
// ones in memory up to a byte budget (least recently used evicted first).
type ExpertStore struct {
	set  *st.Set
	cfg  *config.Config
	locs map[int]*expertLoc

	// ReadAt reads len(dst) bytes at off from path; tests replace it to
	// inject faults. The default uses the shard's open file.
	ReadAt func(path string, off int64, dst []byte) error

	mu       sync.Mutex
	capBytes int64
	used     int64
	lru      *list.List // of *cached, front = most recent
	cache    map[int]*list.Element
	stats    ExpertStats
	files    map[string]*os.File
}

type cached struct {
	key int
	ex  *Expert
}

func newExpertStore(set *st.Set, cfg *config.Config) *ExpertStore {
	s := &ExpertStore{set: set, cfg: cfg, locs: map[int]*expertLoc{}, lru: list.New(),
		cache: map[int]*list.Element{}, capBytes: 1 << 62, files: map[string]*os.File{}}
	s.ReadAt = s.readFile
	return s
}

// SetBudget sets the cache budget in bytes; at least top-k+1 experts are kept.
func (s *ExpertStore) SetBudget(bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capBytes = bytes
}

// Stats returns a snapshot of the counters.
func (s *ExpertStore) Stats() ExpertStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// ExpertBytes is the size of one expert's six tensors.
func (s *ExpertStore) ExpertBytes() int64 {
	c := s.cfg
	return int64(2*c.MoEInter*(c.Latent/2+c.Latent/32) + c.Latent*(c.MoEInter/2+c.MoEInter/32))
}

func (s *ExpertStore) readFile(path string, off int64, dst []byte) error {
	s.mu.Lock()
	f, ok := s.files[path]
	if !ok {
		var err error
		f, err = os.Open(path)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.files[path] = f
	}
	s.mu.Unlock()
	n, err := f.ReadAt(dst, off)
	if n == len(dst) {
		return nil
	}
	if err == nil {
		err = fmt.Errorf("short read")
	}
	return fmt.Errorf("read %d bytes at offset %d: got %d: %w", len(dst), off, n, err)
}

// locate checks the six tensors of expert e of layer li and records where
// they are; it returns a problem description or "".
func (s *ExpertStore) locate(prefix string, li, e int) string {
	c := s.cfg
	base := fmt.Sprintf("%smodel.layers.%d.block_sparse_moe.experts.%d.", prefix, li, e)
	shapes := [6][2]int{
		{c.MoEInter, c.Latent / 2}, {c.MoEInter, c.Latent / 32},
		{c.MoEInter, c.Latent / 2}, {c.MoEInter, c.Latent / 32},
		{c.Latent, c.MoEInter / 2}, {c.Latent, c.MoEInter / 32},
	}
	names := [6]string{"w1.weight_packed", "w1.weight_scale", "w3.weight_packed", "w3.weight_scale", "w2.weight_packed", "w2.weight_scale"}
	loc := &expertLoc{}
	for i, n := range names {
		t, ok := s.set.Get(base + n)
		if !ok {
			return fmt.Sprintf("missing tensor %s%s (expected U8 %v)", base, n, shapes[i])
		}
		if t.DType != st.U8 || !shapeEq(t.Shape, shapes[i][:]) {
			return fmt.Sprintf("tensor %s%s is %s%v, expected U8 %v", base, n, t.DType, t.Shape, shapes[i])
		}
		loc.parts[i] = t
	}
	lo, hi, sum := loc.parts[0].Offset, int64(0), int64(0)
	loc.run = true
	for _, t := range loc.parts {
		lo = min(lo, t.Offset)
		hi = max(hi, t.Offset+t.Size)
		sum += t.Size
		loc.run = loc.run && t.Path == loc.parts[0].Path
	}
	loc.path = loc.parts[0].Path
	loc.run = loc.run && hi-lo == sum
	loc.off, loc.size = lo, sum
	s.locs[li*c.Experts+e] = loc
	return ""
}

// Get returns expert e of layer li, reading it if it is not cached.
func (s *ExpertStore) Get(li, e int) (*Expert, error) {
	key := li*s.cfg.Experts + e
	s.mu.Lock()
	s.stats.Requests++
	if el, ok := s.cache[key]; ok {
		s.lru.MoveToFront(el)
		s.stats.Hits++
		ex := el.Value.(*cached).ex
		s.mu.Unlock()
		return ex, nil
	}
	s.stats.Misses++
	loc := s.locs[key]
	s.mu.Unlock()
	if loc == nil {
		return nil, &ExpertError{li, e, "?", fmt.Errorf("expert was never located")}
	}
	t0 := time.Now()
	ex, err := s.load(loc)
	dt := time.Since(t0).Seconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ReadSeconds += dt
	if err != nil {
		s.stats.Failures++
		return nil, &ExpertError{li, e, loc.path, err}
	}
	s.stats.BytesRead += ex.Bytes
	for _, m := range []*kernels.Mat{&ex.W1, &ex.W3, &ex.W2} {
		s.stats.NaNScaleGroups += int64(kernels.CountNaNScales(m.Scales))
	}
	minKeep := int64(s.cfg.TopK+1) * ex.Bytes
	for s.used+ex.Bytes > max(s.capBytes, minKeep) && s.lru.Len() > 0 {
		old := s.lru.Remove(s.lru.Back()).(*cached)
		delete(s.cache, old.key)
		s.used -= old.ex.Bytes
		s.stats.Evictions++
	}
	s.cache[key] = s.lru.PushFront(&cached{key, ex})
	s.used += ex.Bytes
	return ex, nil
}

func (s *ExpertStore) load(loc *expertLoc) (*Expert, error) {
	buf := make([]byte, loc.size)
	parts := make([][]byte, 6)
	if loc.run {
		if err := s.ReadAt(loc.path, loc.off, buf); err != nil {
			return nil, err
		}
		for i, t := range loc.parts {
			parts[i] = buf[t.Offset-loc.off : t.Offset-loc.off+t.Size]
		}
	} else {
		o := int64(0)
		for i, t := range loc.parts {
			parts[i] = buf[o : o+t.Size]
			if err := s.ReadAt(t.Path, t.Offset, parts[i]); err != nil {
				return nil, err
			}
			o += t.Size
		}
	}
	c := s.cfg
	ex := &Expert{Bytes: loc.size}
	ex.W1 = kernels.Mat{DType: kernels.MXFP4, Rows: c.MoEInter, Cols: c.Latent, Packed: parts[0], Scales: parts[1]}
	ex.W3 = kernels.Mat{DType: kernels.MXFP4, Rows: c.MoEInter, Cols: c.Latent, Packed: parts[2], Scales: parts[3]}
	ex.W2 = kernels.Mat{DType: kernels.MXFP4, Rows: c.Latent, Cols: c.MoEInter, Packed: parts[4], Scales: parts[5]}
	return ex, nil
}

// Close releases the store's open files.
func (s *ExpertStore) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.Close()
	}
	s.files = map[string]*os.File{}
}
