package engine

import (
	"fmt"
	"path/filepath"
	"sync"

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
	// bytesRead is what was read from disk for the tables since binding.
	bytesRead() int64
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

func (t *residentTables) bytesRead() int64 { return 0 }
func (t *residentTables) close()           {}

func embedRow(dst []float32, m *kernels.Mat, id int) {
	c := m.Cols
	if m.DType == kernels.BF16 {
		for i, b := range m.BF16[id*c : (id+1)*c] {
			dst[i] = kernels.BF16ToF32(b)
		}
		return
	}
	copy(dst, m.F32[id*c:(id+1)*c])
}

// streamedTables read embedding rows from the packed trunk when a token
// needs them and apply lm_head in chunks of rows read one after another.
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
	bytes         int64
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
		default:
			return nil, fmt.Errorf("trunk tensor %s is %s, expected BF16 or F32", t.Name, t.DType)
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

func (u *streamedTables) rowBytes() int {
	if u.dtype == kernels.BF16 {
		return 2 * u.hidden
	}
	return 4 * u.hidden
}

func (u *streamedTables) embed(dst []float32, id int) error {
	rb := u.rowBytes()
	u.mu.Lock()
	defer u.mu.Unlock()
	b := alignedBytes(int64(rb))
	u.io.begin()
	_, err := u.f.ReadAt(b, u.embedRun.Offset+u.embedT.Offset+int64(id)*int64(rb))
	u.io.end()
	if err != nil {
		return fmt.Errorf("embedding row %d: %w", id, err)
	}
	u.bytes += int64(rb)
	mat := &kernels.Mat{DType: u.dtype, Rows: 1, Cols: len(dst)}
	bindBytes(mat, b)
	embedRow(dst, mat, 0)
	return nil
}

func (u *streamedTables) head(p *kernels.Pool, logits, h []float32, n int) error {
	H, V := u.hidden, u.vocab
	rb := u.rowBytes()
	rows := max(1, plan.HeadChunkBytes/rb)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.buf == nil {
		u.buf, u.release = runBuffer(int64(rows * rb))
	}
	out := make([]float32, n*rows)
	for r0 := 0; r0 < V; r0 += rows {
		k := min(rows, V-r0)
		b := u.buf[:k*rb]
		u.io.begin()
		_, err := u.f.ReadAt(b, u.headRun.Offset+u.headT.Offset+int64(r0)*int64(rb))
		u.io.end()
		if err != nil {
			return fmt.Errorf("lm_head rows %d..%d: %w", r0, r0+k-1, err)
		}
		u.bytes += int64(len(b))
		mat := &kernels.Mat{DType: u.dtype, Rows: k, Cols: H}
		bindBytes(mat, b)
		kernels.MatMul(p, out[:n*k], mat, h, n)
		for t := 0; t < n; t++ {
			copy(logits[t*V+r0:t*V+r0+k], out[t*k:(t+1)*k])
		}
	}
	return nil
}

func (u *streamedTables) bytesRead() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bytes
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
