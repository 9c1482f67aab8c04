package engine

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"k3/engine/plan"
	"k3/kernels"
	"k3/storage/direct"
	st "k3/storage/safetensors"
)

// A streamed draft model (docs/DSPARK.md §6.1) keeps in memory only what
// the context rows of every position the target computes need (its norms,
// the context projection and the kv_a projections: so a pass that does not
// draft reads nothing of it) and reads each other matrix from its file,
// with direct I/O into one buffer of the largest of them, every time a
// block pass uses it: once per drafting cycle, beside the streamed trunk.
// The bytes bound are the file's, as a resident draft model's are, so
// every drafted token is the same; only where the weights live differs.

// draftStreamedNames are the top-level matrices a streamed draft model
// reads per use, and draftLayerStreamed a draft layer's (all but kv_a).
// The Markov head's first table is read a row at a time (draftRowRead).
var (
	draftStreamedNames = map[string]bool{"markov_head.markov_w2.weight": true}
	draftLayerStreamed = map[string]bool{"self_attn.q_a_proj": true, "self_attn.q_b_proj": true, "self_attn.kv_b_proj": true,
		"self_attn.o_proj": true, "mlp.gate_proj": true, "mlp.up_proj": true, "mlp.down_proj": true}
)

// draftRowRead is the matrix a streamed draft model reads one row of per
// drafted token.
const draftRowRead = "markov_head.markov_w1.weight"

// draftStreamed reports whether tensor n of a draft model is read per use
// when the draft model is streamed.
func draftStreamed(n string) bool {
	if draftStreamedNames[n] {
		return true
	}
	rest, ok := strings.CutPrefix(n, "layers.")
	if i := strings.IndexByte(rest, '.'); ok && i > 0 {
		return draftLayerStreamed[strings.TrimSuffix(rest[i+1:], ".weight")]
	}
	return false
}

// draftStream reads the streamed matrices. One is in use at a time: the
// buffer holds the last one read.
type draftStream struct {
	set    *st.Set
	io     *ioTracker
	shells map[*kernels.Mat]string // a streamed matrix's shape, by tensor name
	mu     sync.Mutex              // held by a drafting step (lock) and by close
	files  map[string]*direct.File
	buf    []byte
	free   func()
	bytes  atomic.Int64 // read since the model was opened (the check at bind excluded)
}

// streamSizes are, from the draft's metadata, the bytes its streamed
// matrices take (read per drafting cycle), the buffer they are read into
// (the largest, from the page it starts in, in whole pages) and the bytes
// it keeps resident when streamed. The buffer is mapped in huge pages
// where it can be (runBuffer), resident in whole ones: StreamBytes counts
// it so (draftBufferBytes).
func streamSizes(set *st.Set) (read, buffer, resident int64) {
	for _, n := range set.Names() {
		t, _ := set.Get(n)
		switch {
		case draftIgnored[n] || n == draftRowRead:
		case draftStreamed(n):
			read += t.Size
			buffer = max(buffer, direct.AlignUp(t.Offset%direct.Align+t.Size))
		default:
			resident += t.Size
		}
	}
	return read, buffer, resident
}

// draftBufferBytes is the stream buffer as resident: whole huge pages
// (runBuffer), or below one huge page a page-aligned heap buffer
// (draftBuffer) with its page of slack.
func draftBufferBytes(buffer int64) int64 {
	if buffer < plan.HugePage {
		return buffer + direct.Align
	}
	return (buffer + plan.HugePage - 1) / plan.HugePage * plan.HugePage
}

// draftBuffer allocates the stream buffer of n bytes (whole pages),
// page-aligned for O_DIRECT: in huge pages from one huge page up, else on
// the heap (a huge page would hold a small draft model's buffer many
// times over).
func draftBuffer(n int64) ([]byte, func()) {
	if n >= plan.HugePage {
		return runBuffer(n)
	}
	b := alignedBytes(n + direct.Align)
	off := int64(0)
	if r := int64(uintptr(unsafe.Pointer(&b[0])) % direct.Align); r != 0 {
		off = direct.Align - r
	}
	return b[off : off+n : off+n], func() {}
}

func newDraftStream(set *st.Set, io *ioTracker) *draftStream {
	_, buffer, _ := streamSizes(set)
	s := &draftStream{set: set, io: io, shells: map[*kernels.Mat]string{}, files: map[string]*direct.File{}}
	s.buf, s.free = draftBuffer(max(buffer, direct.Align))
	return s
}

// read reads tensor t into the buffer, from the page it starts in, and
// returns its bytes there.
func (s *draftStream) read(t *st.Tensor) ([]byte, error) {
	f, ok := s.files[t.Path]
	if !ok {
		var err error
		if f, err = direct.Open(t.Path); err != nil {
			return nil, err
		}
		s.files[t.Path] = f
	}
	lo := direct.AlignDown(t.Offset)
	head := t.Offset - lo
	n := head + t.Size
	if int64(len(s.buf)) < n {
		return nil, fmt.Errorf("draft model: tensor %s (%d bytes) does not fit its stream buffer (%d)", t.Name, t.Size, len(s.buf))
	}
	s.io.begin()
	defer s.io.end()
	// whole pages straight from the device (the buffer holds them: its
	// size is rounded up to a page); a tail at the file's end (less than a
	// page) by a plain read, not through direct's bounce buffer (a huge
	// page the plan does not count)
	body := direct.AlignUp(n)
	if size, err := f.Size(); err != nil || lo+body > size {
		body = direct.AlignDown(n)
	}
	if body > 0 {
		if _, err := f.ReadAt(s.buf[:body], lo); err != nil {
			return nil, err
		}
	}
	if from := max(body, head); from < n { // the file's last bytes
		if err := s.set.ReadTensorAt(t, from-head, s.buf[from:n]); err != nil {
			return nil, err
		}
	}
	s.bytes.Add(t.Size)
	return s.buf[head:n:n], nil
}

// use returns m ready to compute with: m itself when resident, else the
// streamed matrix read into the buffer (valid until the next use).
func (s *draftStream) use(m *kernels.Mat) (*kernels.Mat, error) {
	if s == nil {
		return m, nil
	}
	name, ok := s.shells[m]
	if !ok {
		return m, nil
	}
	t, _ := s.set.Get(name)
	b, err := s.read(t)
	if err != nil {
		return nil, fmt.Errorf("draft model: read %s: %w", name, err)
	}
	out := &kernels.Mat{Rows: m.Rows, Cols: m.Cols, DType: m.DType}
	bindBytes(out, b)
	return out, nil
}

// row copies row id of the streamed matrix m (the Markov head's first
// table: one row per drafted token) as float32 into dst, reading that
// row alone; a resident m is read in place.
func (s *draftStream) row(dst []float32, m *kernels.Mat, id int) error {
	name, ok := "", false
	if s != nil {
		name, ok = s.shells[m]
	}
	if !ok {
		embedRow(dst, m, id)
		return nil
	}
	t, _ := s.set.Get(name)
	size := int64(4)
	if m.DType == kernels.BF16 {
		size = 2
	}
	b := alignedBytes(int64(m.Cols) * size)
	if err := s.set.ReadTensorAt(t, int64(id)*int64(len(b)), b); err != nil {
		return err
	}
	s.bytes.Add(int64(len(b)))
	r := &kernels.Mat{Rows: 1, Cols: m.Cols, DType: m.DType}
	bindBytes(r, b)
	embedRow(dst, r, 0)
	return nil
}

// shell turns a matrix bound (and checked) at load into the shape of a
// streamed one: its bytes are read again at each use.
func (s *draftStream) shell(name string, m *kernels.Mat) *kernels.Mat {
	if s == nil || m == nil {
		return m
	}
	sh := &kernels.Mat{Rows: m.Rows, Cols: m.Cols, DType: m.DType}
	s.shells[sh] = name
	return sh
}

// resetBytes zeroes the bytes read. Nil-safe.
func (s *draftStream) resetBytes() {
	if s != nil {
		s.bytes.Store(0)
	}
}

// lock holds the buffer for a whole drafting step (a block pass, or the
// context rows of a pass) and returns its unlock. Nil-safe.
func (s *draftStream) lock() func() {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	return s.mu.Unlock
}

func (s *draftStream) close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
	if s.free != nil {
		s.free()
		s.free, s.buf = nil, nil
	}
}

// streamBytes is what the streamed matrices read since the model opened.
func (d *Draft) streamBytes() int64 {
	if d == nil || d.stream == nil {
		return 0
	}
	return d.stream.bytes.Load()
}

// streamSource binds a streamed draft model at load: its streamed
// matrices are read into the stream's buffer (each checked and turned
// into a shell before the next is read), the rest as a resident one's.
type streamSource struct {
	setSource
	s *draftStream
}

func (src streamSource) data(t *st.Tensor) ([]byte, error) {
	if !draftStreamed(t.Name) {
		return src.setSource.data(t)
	}
	return src.s.read(t)
}

// mat binds matrix name (by columns: kv_b, which MatTVec reads so) and,
// for a streamed draft model, checks it for NaN and Inf at once and keeps
// only its shape: its bytes are read again at each use.
func (d *Draft) mat(b *binder, name string, rows, cols int, byCols bool) *kernels.Mat {
	var m *kernels.Mat
	if byCols {
		m = b.matByColumns(name, rows, cols)
	} else {
		m = b.mat(name, rows, cols)
	}
	if d.stream == nil || m == nil || !(draftStreamed(name) || name == draftRowRead) {
		return m
	}
	if !matFinite(m) {
		d.streamBad = append(d.streamBad, name)
	}
	return d.stream.shell(name, m)
}
