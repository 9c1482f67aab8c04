package engine

import (
	"fmt"
	"path/filepath"
	"sync"
	"unsafe"

	"k3/engine/plan"
	"k3/kernels"
	"k3/storage/direct"
	"k3/storage/trunk"
)

// tables are the model's vocabulary-sized matrices: the embedding the
// forward pass starts from and lm_head it ends with. They are resident, or
// in ultra-low-memory mode read from the packed trunk when needed; the
// arithmetic per row is the same either way.
type tables interface {
	// embed writes the embedding of id into dst.
	embed(dst []float32, id int) error
	// head computes logits = lm_head · h for n positions.
	head(p *kernels.Pool, logits, h []float32, n int) error
	// bytesRead is what was read from disk for the embedding and the
	// lm_head since binding.
	bytesRead() (embed, head int64)
	close()
}

// residentTables keep both matrices in memory.
type residentTables struct {
	embedding, lmHead *kernels.Mat
}

func (t *residentTables) embed(dst []float32, id int) error {
	embedRow(dst, t.embedding, id)
	return nil
}

func (t *residentTables) head(p *kernels.Pool, logits, h []float32, n int) error {
	kernels.MatMul(p, logits, t.lmHead, h, n)
	return nil
}

func (t *residentTables) bytesRead() (int64, int64) { return 0, 0 }
func (t *residentTables) close()                    {}

func embedRow(dst []float32, m *kernels.Mat, id int) {
	c := m.Cols
	switch m.DType {
	case kernels.BF16C:
		row := make([]uint16, c)
		m.DecodeRowBF16(id, row)
		for i, b := range row {
			dst[i] = kernels.BF16ToF32(b)
		}
		return
	case kernels.BF16:
		for i, b := range m.BF16[id*c : (id+1)*c] {
			dst[i] = kernels.BF16ToF32(b)
		}
		return
	}
	copy(dst, m.F32[id*c:(id+1)*c])
}

// headTables read embedding rows from the packed trunk when a token needs
// them and keep lm_head resident: the memory floor's tables
// (plan.StreamsEmbedding).
type headTables struct {
	rows   *streamedTables // its embed only
	lmHead *kernels.Mat
}

func (t *headTables) embed(dst []float32, id int) error { return t.rows.embed(dst, id) }

func (t *headTables) head(p *kernels.Pool, logits, h []float32, n int) error {
	kernels.MatMul(p, logits, t.lmHead, h, n)
	return nil
}

func (t *headTables) bytesRead() (int64, int64) {
	e, _ := t.rows.bytesRead()
	return e, 0
}

func (t *headTables) close() { t.rows.close() }

// streamedTables read embedding rows from the packed trunk when a token
// needs them and apply lm_head in chunks of rows, each read while the one
// before is applied.
type streamedTables struct {
	f             *direct.File // trunk.bin
	embedT, headT *trunk.Tensor
	embedRun      *trunk.Run
	headRun       *trunk.Run
	dtype         kernels.DType
	hidden, vocab int
	mu            sync.Mutex
	buf           []byte
	release       func()
	embedBytes    int64 // read for embedding rows
	headBytes     int64 // read for lm_head rows
	io            *ioTracker
}

// openStreamedTables locates the embedding and lm_head in the trunk's runs.
func openStreamedTables(tr *trunk.Trunk, prefix string, hidden, vocab int, tied bool) (*streamedTables, error) {
	u := &streamedTables{hidden: hidden, vocab: vocab}
	find := func(run, name string) (*trunk.Run, *trunk.Tensor, error) {
		r, ok := tr.Run(run)
		if !ok {
			return nil, nil, fmt.Errorf("trunk %s has no %q run", tr.Dir(), run)
		}
		t, ok := r.Tensor(prefix + name)
		if !ok || len(t.Shape) != 2 || t.Shape[0] != int64(vocab) || t.Shape[1] != int64(hidden) {
			return nil, nil, fmt.Errorf("trunk run %q: no %s%s of shape [%d %d]", run, prefix, name, vocab, hidden)
		}
		return r, t, nil
	}
	var err error
	if u.embedRun, u.embedT, err = find(trunk.RunEmbed, "model.embed_tokens.weight"); err != nil {
		return nil, err
	}
	if tied {
		u.headRun, u.headT = u.embedRun, u.embedT
		if r, t, err := find(trunk.RunHead, "model.embed_tokens.weight"); err == nil {
			u.headRun, u.headT = r, t
		}
	} else if u.headRun, u.headT, err = find(trunk.RunHead, "lm_head.weight"); err != nil {
		return nil, err
	}
	for _, t := range []*trunk.Tensor{u.embedT, u.headT} {
		switch t.DType {
		case "BF16":
			u.dtype = kernels.BF16
		case "F32":
			u.dtype = kernels.F32
		case trunk.BF16C:
			u.dtype = kernels.BF16C
		default:
			return nil, fmt.Errorf("trunk tensor %s is %s, expected BF16, F32 or %s", t.Name, t.DType, trunk.BF16C)
		}
	}
	if u.embedT.DType != u.headT.DType {
		return nil, fmt.Errorf("trunk tables differ in dtype: %s is %s, %s is %s", u.embedT.Name, u.embedT.DType, u.headT.Name, u.headT.DType)
	}
	if u.f, err = direct.Open(filepath.Join(tr.Dir(), trunk.BinFile)); err != nil {
		return nil, err
	}
	return u, nil
}

// rowBytes is the bytes of a row (the longest a BF16C row can be).
func (u *streamedTables) rowBytes() int {
	switch u.dtype {
	case kernels.BF16:
		return 2 * u.hidden
	case kernels.BF16C:
		return (u.hidden+kernels.BF16CBlock-1)/kernels.BF16CBlock + 2*u.hidden
	}
	return 4 * u.hidden
}

// readCompressed reads rows r0..r0+k-1 of the BF16C tensor t of run (their
// row offsets, then the rows into buf) and returns them as a checked
// matrix: the bytes come straight from disk, unverified.
func (u *streamedTables) readCompressed(run *trunk.Run, t *trunk.Tensor, r0, k int, buf []byte, count *int64) (kernels.Mat, error) {
	base := run.Offset + t.Offset
	offs := make([]uint64, k+1)
	ob := unsafe.Slice((*byte)(unsafe.Pointer(&offs[0])), 8*(k+1))
	u.io.begin()
	_, err := u.f.ReadAt(ob, base+8*int64(r0))
	u.io.end()
	if err != nil {
		return kernels.Mat{}, err
	}
	lo, hi := offs[0], offs[k]
	if hi < lo || hi-lo > uint64(len(buf)) || int64(hi) > t.Size-8*(t.Shape[0]+1) {
		return kernels.Mat{}, fmt.Errorf("trunk tensor %s (%s): rows %d..%d have bad row offsets %d..%d: the trunk is corrupt; repack it (k3 pack MODEL_DIR TRUNK_DIR --compress --force)", t.Name, t.DType, r0, r0+k-1, lo, hi)
	}
	z := buf[:hi-lo]
	u.io.begin()
	_, err = u.f.ReadAt(z, base+8*(t.Shape[0]+1)+int64(lo))
	u.io.end()
	if err != nil {
		return kernels.Mat{}, err
	}
	*count += int64(len(ob) + len(z))
	m := kernels.Mat{DType: kernels.BF16C, Rows: k, Cols: u.hidden, Z: z, ZOff: offs}
	if err := m.Check(); err != nil {
		return m, fmt.Errorf("trunk tensor %s (%s) rows %d..%d are corrupt: %v; repack the trunk (k3 pack MODEL_DIR TRUNK_DIR --compress --force)", t.Name, t.DType, r0, r0+k-1, err)
	}
	return m, nil
}

func (u *streamedTables) embed(dst []float32, id int) error {
	rb := u.rowBytes()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.dtype == kernels.BF16C {
		m, err := u.readCompressed(u.embedRun, u.embedT, id, 1, make([]byte, rb), &u.embedBytes)
		if err != nil {
			return fmt.Errorf("embedding row %d: %w", id, err)
		}
		embedRow(dst, &m, 0)
		return nil
	}
	b := alignedBytes(int64(rb))
	u.io.begin()
	_, err := u.f.ReadAt(b, u.embedRun.Offset+u.embedT.Offset+int64(id)*int64(rb))
	u.io.end()
	if err != nil {
		return fmt.Errorf("embedding row %d: %w", id, err)
	}
	u.embedBytes += int64(rb)
	mat := &kernels.Mat{DType: u.dtype, Rows: 1, Cols: len(dst)}
	bindBytes(mat, b)
	embedRow(dst, mat, 0)
	return nil
}

func (u *streamedTables) head(p *kernels.Pool, logits, h []float32, n int) error {
	H, V := u.hidden, u.vocab
	rb := u.rowBytes()
	rows := max(1, plan.HeadChunkBytes/2/rb)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.buf == nil {
		u.buf, u.release = runBuffer(int64(2 * rows * rb))
	}
	// two halves of the buffer: the next chunk of rows is read into one
	// while the other's rows are applied
	halves := [2][]byte{u.buf[: rows*rb : rows*rb], u.buf[rows*rb : 2*rows*rb]}
	type chunk struct {
		mat kernels.Mat
		err error
	}
	read := func(r0 int, buf []byte) chunk {
		k := min(rows, V-r0)
		u.io.urgentAdd(1) // the forward waits for these: trunk read-ahead yields
		defer u.io.urgentAdd(-1)
		if u.dtype == kernels.BF16C {
			mat, err := u.readCompressed(u.headRun, u.headT, r0, k, buf, &u.headBytes)
			return chunk{mat, err}
		}
		b := buf[:k*rb]
		u.io.begin()
		_, err := u.f.ReadAt(b, u.headRun.Offset+u.headT.Offset+int64(r0)*int64(rb))
		u.io.end()
		if err != nil {
			return chunk{err: err}
		}
		u.headBytes += int64(len(b))
		mat := kernels.Mat{DType: u.dtype, Rows: k, Cols: H}
		bindBytes(&mat, b)
		return chunk{mat: mat}
	}
	next := make(chan chunk, 1)
	start := func(c int) {
		go func() { next <- read(c*rows, halves[c%2]) }()
	}
	start(0)
	out := make([]float32, n*rows)
	for c := 0; c*rows < V; c++ {
		r0 := c * rows
		k := min(rows, V-r0)
		got := <-next
		if got.err != nil {
			return fmt.Errorf("lm_head rows %d..%d: %w", r0, r0+k-1, got.err)
		}
		if (c+1)*rows < V {
			start(c + 1) // into the half chunk c-1 used, whose rows are applied
		}
		kernels.MatMul(p, out[:n*k], &got.mat, h, n)
		for t := 0; t < n; t++ {
			copy(logits[t*V+r0:t*V+r0+k], out[t*k:(t+1)*k])
		}
	}
	return nil
}

func (u *streamedTables) bytesRead() (embed, head int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.embedBytes, u.headBytes
}

func (u *streamedTables) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.f != nil {
		u.f.Close()
		u.f = nil
	}
	if u.release != nil {
		u.release()
		u.release, u.buf = nil, nil
	}
}
