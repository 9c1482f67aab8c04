package engine

import (
	"fmt"
	"path/filepath"
	"sync"

	"k3/kernels"
	"k3/storage/direct"
	"k3/storage/trunk"
)

// Ultra-low-memory mode keeps neither the embedding table nor lm_head in
// RAM: embedding rows are read from the packed trunk when a token needs
// them, and lm_head is applied in chunks of rows read one after another.
// The arithmetic per row is the same as with the tables resident.

// headChunkBytes is the lm_head chunk read at a time.
const headChunkBytes = 4 << 20

type ultraTables struct {
	f           *direct.File // trunk.bin
	embed, head *trunk.Tensor
	embedRun    *trunk.Run
	headRun     *trunk.Run
	dtype       kernels.DType
	mu          sync.Mutex
	buf         []byte
	bytes       int64
}

func (u *ultraTables) readAt(b []byte, off int64) error {
	_, err := u.f.ReadAt(b, off)
	return err
}

func (u *ultraTables) rowBytes(cols int) int {
	if u.dtype == kernels.BF16 {
		return 2 * cols
	}
	return 4 * cols
}

// embed writes the embedding of id into dst.
func (m *Model) embed(dst []float32, id int) error {
	if m.ultra == nil {
		embedRow(dst, m.Embed, id)
		return nil
	}
	u := m.ultra
	rb := u.rowBytes(len(dst))
	u.mu.Lock()
	defer u.mu.Unlock()
	buf := make([]uint64, (rb+7)/8)
	b := u64bytes(buf)[:rb]
	if err := u.readAt(b, u.embedRun.Offset+u.embed.Offset+int64(id)*int64(rb)); err != nil {
		return fmt.Errorf("embedding row %d: %w", id, err)
	}
	u.bytes += int64(rb)
	mat := &kernels.Mat{DType: u.dtype, Rows: 1, Cols: len(dst)}
	bindBytes(mat, b)
	embedRow(dst, mat, 0)
	return nil
}

// head computes logits = lm_head · h for n positions.
func (m *Model) head(p *kernels.Pool, logits, h []float32, n int) error {
	if m.ultra == nil {
		kernels.MatMul(p, logits, m.LMHead, h, n)
		return nil
	}
	u := m.ultra
	H, V := m.Cfg.Hidden, m.Cfg.VocabSize
	rb := u.rowBytes(H)
	rows := max(1, headChunkBytes/rb)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.buf == nil {
		u.buf, _ = runBuffer(int64(rows * rb))
	}
	out := make([]float32, n*rows)
	for r0 := 0; r0 < V; r0 += rows {
		k := min(rows, V-r0)
		b := u.buf[:k*rb]
		if err := u.readAt(b, u.headRun.Offset+u.head.Offset+int64(r0)*int64(rb)); err != nil {
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

// setUltra records where the embedding table or lm_head lives in trunk.bin.
func (m *Model) setUltra(tr *trunk.Trunk, name string, r *trunk.Run) error {
	if m.ultra == nil {
		f, err := direct.Open(filepath.Join(tr.Dir(), trunk.BinFile))
		if err != nil {
			return err
		}
		m.ultra = &ultraTables{f: f}
	}
	u := m.ultra
	want := m.Prefix + "model.embed_tokens.weight"
	if name == trunk.RunHead {
		want = m.Prefix + "lm_head.weight"
		if m.Cfg.TieEmbeddings {
			want = m.Prefix + "model.embed_tokens.weight"
		}
	}
	t, ok := r.Tensor(want)
	if !ok && name == trunk.RunHead && m.Cfg.TieEmbeddings {
		u.head, u.headRun = u.embed, u.embedRun
		return nil
	}
	if !ok || len(t.Shape) != 2 || t.Shape[0] != int64(m.Cfg.VocabSize) || t.Shape[1] != int64(m.Cfg.Hidden) {
		return fmt.Errorf("trunk run %q: no %s of shape [%d %d]", name, want, m.Cfg.VocabSize, m.Cfg.Hidden)
	}
	switch t.DType {
	case "BF16":
		u.dtype = kernels.BF16
	case "F32":
		u.dtype = kernels.F32
	default:
		return fmt.Errorf("trunk run %q: %s is %s, expected BF16 or F32", name, want, t.DType)
	}
	if name == trunk.RunEmbed {
		u.embed, u.embedRun = t, r
	} else {
		u.head, u.headRun = t, r
	}
	return nil
}

// UltraBytes is what ultra-low-memory mode read of the model tables.
func (m *Model) UltraBytes() int64 {
	if m.ultra == nil {
		return 0
	}
	m.ultra.mu.Lock()
	defer m.ultra.mu.Unlock()
	return m.ultra.bytes
}
