package engine

import (
	"fmt"
	"strings"
	"unsafe"

	"k3/kernels"
	"k3/storage/config"
	"k3/storage/layout"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// tensorSource supplies tensor metadata and bytes to the binder: the
// checkpoint's shards (bytes copied into fresh memory) or a packed trunk run
// already in memory (bytes aliased in place).
type tensorSource interface {
	get(name string) (*st.Tensor, bool)
	// data returns the tensor's bytes, 8-byte aligned.
	data(t *st.Tensor) ([]byte, error)
}

type setSource struct{ set *st.Set }

func (s setSource) get(name string) (*st.Tensor, bool) { return s.set.Get(name) }

func (s setSource) data(t *st.Tensor) ([]byte, error) {
	b := alignedBytes(t.Size)
	return b, s.set.ReadTensor(t, b)
}

// runSource binds tensors aliased in place from one packed-trunk run in
// memory, whole or in parts (every tensor lies whole in one part).
type runSource struct {
	run   *trunk.Run
	parts []trunk.RunPart
}

// wholeRun is the source of a run read into mem in one piece.
func wholeRun(r *trunk.Run, mem []byte) runSource {
	return runSource{r, []trunk.RunPart{{From: 0, Dst: mem}}}
}

func (r runSource) get(name string) (*st.Tensor, bool) {
	t, ok := r.run.Tensor(name)
	if !ok {
		return nil, false
	}
	return &st.Tensor{Name: t.Name, DType: st.DType(t.DType), Shape: t.Shape, Offset: t.Offset, Size: t.Size}, true
}

// data aliases the tensor in the last part that holds it whole: where two
// parts share a page, a tensor on it is bound in the later part, the one
// kept longer (the MLP part of a streamed layer outlives its attention part).
func (r runSource) data(t *st.Tensor) ([]byte, error) {
	for i := len(r.parts) - 1; i >= 0; i-- {
		p := r.parts[i]
		if t.Offset >= p.From && t.Offset+t.Size <= p.From+int64(len(p.Dst)) {
			o := t.Offset - p.From
			return p.Dst[o : o+t.Size : o+t.Size], nil
		}
	}
	return nil, fmt.Errorf("tensor %s (bytes %d..%d of run %s) is not in the memory read", t.Name, t.Offset, t.Offset+t.Size, r.run.Name)
}

// alignedBytes returns n zeroed bytes with 8-byte alignment.
func alignedBytes(n int64) []byte {
	w := make([]uint64, (n+7)/8)
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)[:n]
}

// binder collects every problem found while binding so one error lists them.
type binder struct {
	src    tensorSource
	cfg    *config.Config
	prefix string
	errs   []string
	bytes  int64
	// matLo is the lowest source offset of the matrices bound since it was
	// last set to -1 (-1: none); matrices alias their source bytes.
	matLo int64
}

func (b *binder) fail(f string, a ...any) { b.errs = append(b.errs, fmt.Sprintf(f, a...)) }

func shapeEq(s []int64, want []int) bool {
	if len(s) != len(want) {
		return false
	}
	for i := range s {
		if s[i] != int64(want[i]) {
			return false
		}
	}
	return true
}

func (b *binder) get(name string, shape []int, dtypes ...st.DType) *st.Tensor {
	full := b.prefix + name
	t, ok := b.src.get(full)
	if !ok {
		b.fail("missing tensor %s (expected shape %v)", full, shape)
		return nil
	}
	if shape != nil && !shapeEq(t.Shape, shape) {
		b.fail("tensor %s has shape %v, expected %v", full, t.Shape, shape)
		return nil
	}
	okType := false
	for _, d := range dtypes {
		okType = okType || t.DType == d
	}
	if !okType {
		b.fail("tensor %s is %s, expected one of %v", full, t.DType, dtypes)
		return nil
	}
	return t
}

func (b *binder) data(t *st.Tensor) []byte {
	d, err := b.src.data(t)
	if err != nil {
		b.fail("%v", err)
		return nil
	}
	b.bytes += t.Size
	return d
}

// stBF16C is the dtype a compressed packed trunk gives the matrices it
// stores in kernels.BF16C form.
const stBF16C = st.DType(trunk.BF16C)

// mat binds a 2-D f32, bf16 or (from a compressed trunk) BF16C matrix,
// aliasing the source bytes. A BF16C matrix is checked as it is bound
// (kernels.BF16CFromBytes), so the kernels may walk its rows unchecked.
func (b *binder) mat(name string, rows, cols int) *kernels.Mat {
	return b.matOf(name, rows, cols, true)
}

// matByColumns binds a matrix a kernel also reads column by column
// (kernels.MatTVec), which BF16C does not allow: f32 or bf16 only.
func (b *binder) matByColumns(name string, rows, cols int) *kernels.Mat {
	return b.matOf(name, rows, cols, false)
}

func (b *binder) matOf(name string, rows, cols int, compressed bool) *kernels.Mat {
	t := b.get(name, []int{rows, cols}, st.BF16, st.F32, stBF16C)
	if t == nil {
		return nil
	}
	if t.DType == stBF16C && !compressed {
		b.fail("tensor %s is stored compressed (%s) but is read by columns, which needs BF16: this trunk was packed by another k3; repack it (k3 pack MODEL_DIR TRUNK_DIR --compress --force)", t.Name, t.DType)
		return nil
	}
	d := b.data(t)
	if d == nil && t.Size > 0 {
		return nil
	}
	if b.matLo < 0 || t.Offset < b.matLo {
		b.matLo = t.Offset
	}
	if t.DType == stBF16C {
		m, err := kernels.BF16CFromBytes(d, rows, cols) // checks the offsets and every row's headers
		if err != nil {
			b.fail("%s", corruptBF16C(t.Name, string(t.DType), t.Size, err))
			return nil
		}
		return &m
	}
	m := &kernels.Mat{Rows: rows, Cols: cols, DType: kernels.F32}
	if t.DType == st.BF16 {
		m.DType = kernels.BF16
	}
	bindBytes(m, d)
	return m
}

// bindBytes points a matrix of DType f32 or bf16 at raw little-endian bytes.
func bindBytes(m *kernels.Mat, d []byte) {
	n := m.Rows * m.Cols
	if n == 0 {
		return
	}
	if m.DType == kernels.BF16 {
		m.BF16 = unsafe.Slice((*uint16)(unsafe.Pointer(&d[0])), n)
	} else {
		m.F32 = unsafe.Slice((*float32)(unsafe.Pointer(&d[0])), n)
	}
}

// vec binds a tensor of any float dtype as float32 (a copy); shape nil
// accepts any, and n > 0 keeps only the first n values (padded A_log).
func (b *binder) vec(name string, shape []int, n int) []float32 {
	t := b.get(name, shape, st.BF16, st.F32, st.F16)
	if t == nil {
		return nil
	}
	d := b.data(t)
	if d == nil && t.Size > 0 {
		return nil
	}
	out := make([]float32, t.Numel())
	if err := st.DecodeFloat32(t.DType, d, out); err != nil {
		b.fail("tensor %s: %v", t.Name, err)
		return nil
	}
	if n > 0 {
		if len(out) < n {
			b.fail("tensor %s%s has %d values, need at least %d", b.prefix, name, len(out), n)
			return nil
		}
		out = out[:n]
	}
	return out
}

// fold returns norm ⊙ proj[0] for an AttnRes pair.
func (b *binder) fold(normName, projName string, h int) []float32 {
	nw := b.vec(normName, []int{h}, 0)
	pw := b.vec(projName, []int{1, h}, 0)
	if nw == nil || pw == nil {
		return nil
	}
	f := make([]float32, h)
	for i := range f {
		f[i] = nw[i] * pw[i]
	}
	return f
}

// err returns the problems found so far as one error, or nil.
func (b *binder) err() error {
	if len(b.errs) == 0 {
		return nil
	}
	return &BindError{b.errs}
}

func f32bytes(s []float32) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*4)
}

// BindError lists every tensor problem found while binding.
type BindError struct{ Problems []string }

func (e *BindError) Error() string {
	const most = 40
	p := e.Problems
	more := ""
	if len(p) > most {
		more = fmt.Sprintf("\n  ... and %d more", len(p)-most)
		p = p[:most]
	}
	return fmt.Sprintf("the checkpoint does not match its config (%d problem(s)):\n  %s%s", len(e.Problems), strings.Join(p, "\n  "), more)
}

// layer binds decoder layer i's trunk weights (routed experts are located
// separately, see ExpertStore.locateAll).
func (b *binder) layer(i int) *Layer {
	c := b.cfg
	H := c.Hidden
	p := layout.Layer(i)
	L := &Layer{Index: i}
	L.InNorm = b.vec(p+"input_layernorm.weight", []int{H}, 0)
	L.PostNorm = b.vec(p+"post_attention_layernorm.weight", []int{H}, 0)
	L.AttnFold = b.fold(p+"self_attention_res_norm.weight", p+"self_attention_res_proj.weight", H)
	L.MLPFold = b.fold(p+"mlp_res_norm.weight", p+"mlp_res_proj.weight", H)
	if c.IsMLA(i) {
		L.Attn = b.mla(p + "self_attn.")
	} else {
		L.Attn = b.kda(p + "self_attn.")
	}
	b.matLo = -1
	if c.IsDense(i) {
		L.MLP = b.dense(p + "mlp.")
	} else {
		L.MLP = b.moe(i, p+layout.MoE)
	}
	L.MLPFrom = max(b.matLo, 0)
	return L
}

// tables binds the model tables (embedding, lm_head, final norms) from the
// checkpoint's shards, resident.
func (b *binder) tables() (*residentTables, []float32, []float32) {
	c := b.cfg
	H := c.Hidden
	t := &residentTables{embedding: b.mat("model.embed_tokens.weight", c.VocabSize, H)}
	if c.TieEmbeddings {
		t.lmHead = t.embedding
	} else {
		t.lmHead = b.mat("lm_head.weight", c.VocabSize, H)
	}
	final := b.vec("model.norm.weight", []int{H}, 0)
	fold := b.fold("model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", H)
	return t, final, fold
}

func has(set *st.Set, name string) bool { _, ok := set.Get(name); return ok }
