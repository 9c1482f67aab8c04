// Package engine is the Kimi K3 model and its runtime: binding a checkpoint,
// the forward pass (KDA, gated MLA, Attention Residuals, latent MoE),
// decoding state and generation.
package engine

import (
	"fmt"
	"strings"
	"unsafe"

	"k3/engine/plan"
	"k3/kernels"
	"k3/storage/config"
	"k3/storage/direct"
	st "k3/storage/safetensors"
	"k3/storage/trunk"
)

// Model holds the bound weights of a (possibly prefix of a) checkpoint.
type Model struct {
	Cfg    *config.Config
	Prefix string // "language_model." in the released layout, else ""
	Bound  int    // number of layers bound (== Cfg.Layers unless --layers)

	Embed     *kernels.Mat // [vocab][hidden]
	LMHead    *kernels.Mat // [vocab][hidden]
	FinalNorm []float32
	OutFold   []float32 // output_attn_res_norm ⊙ output_attn_res_proj
	Layers    []*Layer

	// Experts supplies routed experts; Bind sets an *ExpertStore reading the shards.
	Experts ExpertSource
	// Store is the shard-backed expert store Bind created (also in Experts
	// unless a caller replaced the source).
	Store   *ExpertStore
	trunk   *trunk.Trunk     // packed trunk the model streams from (nil: resident)
	buffers []*direct.Buffer // huge-page memory holding trunk runs
	ultra   *ultraTables     // embedding and lm_head read from disk when needed
	// stream builds the layer provider of a streamed model (nil: resident).
	stream func(e *Engine) (layerProvider, error)
	// Plan is the memory plan the model was opened with (nil from Bind).
	Plan *plan.Plan
	// Fingerprint identifies the model for state files (set by Open).
	Fingerprint uint64
	// TrunkBytes counts the trunk bytes read from disk while binding.
	TrunkBytes int64
}

// Layer is one decoder layer's trunk weights.
type Layer struct {
	Index    int
	MLA      bool
	Dense    bool
	InNorm   []float32
	PostNorm []float32
	AttnFold []float32 // self_attention_res_norm ⊙ self_attention_res_proj
	MLPFold  []float32 // mlp_res_norm ⊙ mlp_res_proj

	G, O *kernels.Mat // output gate and output projection (both kinds)

	// KDA
	Q, K, V, FA, FB, B  *kernels.Mat
	QConv, KConv, VConv []float32 // [channels][kernel]
	ALog                []float32 // [heads] (checkpoint may pad)
	DtBias              []float32 // [heads*head_dim]
	ONorm               []float32 // [head_dim]

	// MLA
	QA, QB, KVA, KVB *kernels.Mat
	QANorm, KVANorm  []float32

	// dense MLP
	Gate, Up, Down *kernels.Mat

	// MoE
	Router               *kernels.Mat
	RouterBias           []float32
	LatDown, LatUp       *kernels.Mat
	LatNorm              []float32
	ShGate, ShUp, ShDown *kernels.Mat
}

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
	words := make([]uint64, (t.Size+7)/8)
	var b []byte
	if len(words) > 0 {
		b = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), t.Size)
	}
	return b, s.set.ReadTensor(t, b)
}

// binder collects every problem found while binding so one error lists them.
type binder struct {
	src    tensorSource
	cfg    *config.Config
	prefix string
	errs   []string
	bytes  int64
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

// mat binds a 2-D f32 or bf16 matrix (aliasing the source bytes).
func (b *binder) mat(name string, rows, cols int) *kernels.Mat {
	t := b.get(name, []int{rows, cols}, st.BF16, st.F32)
	if t == nil {
		return nil
	}
	d := b.data(t)
	if d == nil && t.Size > 0 {
		return nil
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

// Bind binds the trunk of the first `layers` layers (0 = all) from an opened
// checkpoint and locates the routed experts. progress, if not nil, is called
// after each layer.
func Bind(set *st.Set, cfg *config.Config, layers int, progress func(done, total int)) (*Model, error) {
	if layers <= 0 || layers > cfg.Layers {
		layers = cfg.Layers
	}
	prefix, err := detectPrefix(set)
	if err != nil {
		return nil, &BindError{[]string{err.Error()}}
	}
	b := &binder{src: setSource{set}, cfg: cfg, prefix: prefix}
	c := cfg
	H := c.Hidden
	m := &Model{Cfg: cfg, Prefix: b.prefix, Bound: layers}
	m.Embed = b.mat("model.embed_tokens.weight", c.VocabSize, H)
	if c.TieEmbeddings {
		m.LMHead = m.Embed
	} else {
		m.LMHead = b.mat("lm_head.weight", c.VocabSize, H)
	}
	m.FinalNorm = b.vec("model.norm.weight", []int{H}, 0)
	m.OutFold = b.fold("model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", H)
	m.Store = newExpertStore(set, c)
	m.Store.bound = layers
	m.Experts = m.Store
	for i := 0; i < layers; i++ {
		m.Layers = append(m.Layers, b.layer(i, m.Store))
		if progress != nil {
			progress(i+1, layers)
		}
		if len(b.errs) > 200 {
			break
		}
	}
	if len(b.errs) > 0 {
		return nil, &BindError{b.errs}
	}
	m.TrunkBytes = b.bytes
	return m, nil
}

func has(set *st.Set, name string) bool { _, ok := set.Get(name); return ok }

func (b *binder) layer(i int, ex *ExpertStore) *Layer {
	c := b.cfg
	H := c.Hidden
	p := fmt.Sprintf("model.layers.%d.", i)
	L := &Layer{Index: i, MLA: c.IsMLA(i), Dense: c.IsDense(i)}
	L.InNorm = b.vec(p+"input_layernorm.weight", []int{H}, 0)
	L.PostNorm = b.vec(p+"post_attention_layernorm.weight", []int{H}, 0)
	L.AttnFold = b.fold(p+"self_attention_res_norm.weight", p+"self_attention_res_proj.weight", H)
	L.MLPFold = b.fold(p+"mlp_res_norm.weight", p+"mlp_res_proj.weight", H)
	a := p + "self_attn."
	if L.MLA {
		nh := c.Heads
		L.QA = b.mat(a+"q_a_proj.weight", c.QLoraRank, H)
		L.QANorm = b.vec(a+"q_a_layernorm.weight", []int{c.QLoraRank}, 0)
		L.QB = b.mat(a+"q_b_proj.weight", nh*(c.QKNope+c.QKRope), c.QLoraRank)
		L.KVA = b.mat(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.QKRope, H)
		L.KVANorm = b.vec(a+"kv_a_layernorm.weight", []int{c.KVLoraRank}, 0)
		L.KVB = b.mat(a+"kv_b_proj.weight", nh*(c.QKNope+c.VHead), c.KVLoraRank)
		if c.OutputGate {
			L.G = b.mat(a+"g_proj.weight", nh*c.VHead, H)
		}
		L.O = b.mat(a+"o_proj.weight", H, nh*c.VHead)
	} else {
		P := c.KDAHeads * c.KDAHeadDim
		L.Q = b.mat(a+"q_proj.weight", P, H)
		L.K = b.mat(a+"k_proj.weight", P, H)
		L.V = b.mat(a+"v_proj.weight", P, H)
		L.QConv = b.vec(a+"q_conv1d.weight", []int{P, 1, c.ConvK}, 0)
		L.KConv = b.vec(a+"k_conv1d.weight", []int{P, 1, c.ConvK}, 0)
		L.VConv = b.vec(a+"v_conv1d.weight", []int{P, 1, c.ConvK}, 0)
		L.FA = b.mat(a+"f_a_proj.weight", c.KDAHeadDim, H)
		L.FB = b.mat(a+"f_b_proj.weight", P, c.KDAHeadDim)
		L.B = b.mat(a+"b_proj.weight", c.KDAHeads, H)
		L.ALog = b.vec(a+"A_log", nil, c.KDAHeads)
		L.DtBias = b.vec(a+"dt_bias", []int{P}, 0)
		L.ONorm = b.vec(a+"o_norm.weight", []int{c.KDAHeadDim}, 0)
		L.G = b.mat(a+"g_proj.weight", P, H)
		L.O = b.mat(a+"o_proj.weight", H, P)
	}
	if L.Dense {
		f := p + "mlp."
		L.Gate = b.mat(f+"gate_proj.weight", c.Intermediate, H)
		L.Up = b.mat(f+"up_proj.weight", c.Intermediate, H)
		L.Down = b.mat(f+"down_proj.weight", H, c.Intermediate)
		return L
	}
	f := p + "block_sparse_moe."
	L.Router = b.mat(f+"gate.weight", c.Experts, H)
	L.RouterBias = b.vec(f+"gate.e_score_correction_bias", []int{c.Experts}, 0)
	L.LatDown = b.mat(f+"routed_expert_down_proj.weight", c.Latent, H)
	L.LatUp = b.mat(f+"routed_expert_up_proj.weight", H, c.Latent)
	if c.LatentNorm {
		L.LatNorm = b.vec(f+"routed_expert_norm.weight", []int{c.Latent}, 0)
	}
	if c.SharedExperts > 0 {
		w := c.SharedExperts * c.MoEInter
		L.ShGate = b.mat(f+"shared_experts.gate_proj.weight", w, H)
		L.ShUp = b.mat(f+"shared_experts.up_proj.weight", w, H)
		L.ShDown = b.mat(f+"shared_experts.down_proj.weight", H, w)
	}
	for e := 0; ex != nil && e < c.Experts; e++ {
		if msg := ex.locate(b.prefix, i, e); msg != "" {
			b.fail("%s", msg)
		}
	}
	return L
}

func u64bytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// Close releases the model's expert store, trunk file and run memory.
func (m *Model) Close() {
	if m.Store != nil {
		m.Store.Close()
	}
	if m.ultra != nil {
		m.ultra.f.Close()
		m.ultra = nil
	}
	if m.trunk != nil {
		m.trunk.Close()
		m.trunk = nil
	}
	for _, b := range m.buffers {
		b.Free()
	}
	m.buffers = nil
}

// IONotes says where reads could not use O_DIRECT and fell back to buffered
// I/O (tmpfs and some filesystems refuse it); empty when every read bypassed
// the page cache.
func (m *Model) IONotes() []string {
	var notes []string
	if m.trunk != nil && !m.trunk.Direct() {
		notes = append(notes, "packed trunk: O_DIRECT refused by the filesystem, buffered reads")
	}
	if m.Store != nil {
		notes = append(notes, m.Store.ioNotes()...)
	}
	return notes
}
