package trunk

import (
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"strings"

	"k3/kernels"
	"k3/storage/layout"
	"k3/storage/safetensors"
)

// compressedMats are the per-layer matrices (names after
// "model.layers.<i>.") the engine reads only through kernels.MatMul and
// row dots (engine/kda.go, mla.go, dense.go, moe.go bind them with
// binder.mat), so they can be stored BF16C. Left out on purpose:
// self_attn.kv_b_proj.weight (read column-wise by kernels.MatTVec), the
// AttnRes projections ([1, hidden], read as vectors) and every vector.
var compressedMats = map[string]bool{
	// KDA
	"self_attn.q_proj.weight": true, "self_attn.k_proj.weight": true, "self_attn.v_proj.weight": true,
	"self_attn.f_a_proj.weight": true, "self_attn.f_b_proj.weight": true, "self_attn.b_proj.weight": true,
	"self_attn.g_proj.weight": true, "self_attn.o_proj.weight": true,
	// gated MLA (g_proj and o_proj as above)
	"self_attn.q_a_proj.weight": true, "self_attn.q_b_proj.weight": true, "self_attn.kv_a_proj_with_mqa.weight": true,
	// dense MLP
	"mlp.gate_proj.weight": true, "mlp.up_proj.weight": true, "mlp.down_proj.weight": true,
	// MoE: router, latent projections, shared experts
	"block_sparse_moe.gate.weight":                     true,
	"block_sparse_moe.routed_expert_down_proj.weight":  true,
	"block_sparse_moe.routed_expert_up_proj.weight":    true,
	"block_sparse_moe.shared_experts.gate_proj.weight": true,
	"block_sparse_moe.shared_experts.up_proj.weight":   true,
	"block_sparse_moe.shared_experts.down_proj.weight": true,
}

// Compressible reports whether a packed trunk with compression stores the
// checkpoint tensor called name (without the source prefix), of dtype dt
// and shape shape, in BF16C form: a 2-D BF16 matrix the engine reads only
// by rows (the embedding, lm_head and the layer matrices of
// compressedMats) that can come out smaller (rows shorter than 32 weights
// have no block to compress and only grow by their offsets and headers).
// Everything else keeps its checkpoint bytes.
func Compressible(name string, dt safetensors.DType, shape []int64) bool {
	if dt != safetensors.BF16 || len(shape) != 2 || shape[0] < 1 || shape[1] < 1 || shape[0] > 1<<40 || shape[1] > 1<<40 {
		return false
	}
	if lo, _ := bf16cRowBounds(shape[1]); 8+lo >= 2*shape[1] {
		return false
	}
	switch name {
	case "model.embed_tokens.weight", "lm_head.weight":
		return true
	}
	_, tail, ok := layout.LayerOf(name)
	return ok && !strings.HasPrefix(name, layout.ReleasePrefix) && compressedMats[tail]
}

// Kind is a tensor's name with the source prefix and the layer number
// taken out ("model.layers.3.mlp.up_proj.weight" -> "mlp.up_proj.weight"),
// for tables of compression by tensor kind.
func Kind(name, prefix string) string {
	n := strings.TrimPrefix(name, prefix)
	if _, tail, ok := layout.LayerOf(n); ok && !strings.HasPrefix(n, layout.ReleasePrefix) {
		return tail
	}
	return n
}

// KindStats is what compression did to one kind of tensor.
type KindStats struct {
	Kind       string
	Tensors    int   // tensors of this kind
	Compressed int   // of them stored BF16C
	Logical    int64 // checkpoint bytes
	Stored     int64 // bytes in trunk.bin
}

// Ratio is Logical / Stored (1 when nothing is stored).
func (k KindStats) Ratio() float64 {
	if k.Stored == 0 {
		return 1
	}
	return float64(k.Logical) / float64(k.Stored)
}

// ByKind sums the tensors of m by kind (see Kind), in order of first
// appearance; only kinds with at least one BF16C tensor are listed.
func (m *Manifest) ByKind() []KindStats {
	var out []KindStats
	at := map[string]int{}
	for i := range m.Runs {
		for j := range m.Runs[i].Tensors {
			t := &m.Runs[i].Tensors[j]
			k := Kind(t.Name, m.Source.Prefix)
			x, ok := at[k]
			if !ok {
				x = len(out)
				at[k] = x
				out = append(out, KindStats{Kind: k})
			}
			s := &out[x]
			s.Tensors++
			s.Logical += t.LogicalSize()
			s.Stored += t.Size
			if t.Compressed() {
				s.Compressed++
			}
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s.Compressed > 0 {
			kept = append(kept, s)
		}
	}
	return kept
}

// bf16cRowBounds are the shortest and longest stored row of cols weights:
// nb = ceil(cols/32) header bytes, then 48 bytes per compressed block, 64
// per raw full block and 2 per weight of a short last block (always raw).
func bf16cRowBounds(cols int64) (lo, hi int64) {
	nb := (cols + kernels.BF16CBlock - 1) / kernels.BF16CBlock
	full := cols / kernels.BF16CBlock
	tail := cols % kernels.BF16CBlock
	return nb + 48*full + 2*tail, nb + 64*full + 2*tail
}

// bf16cRawStep is what one raw full block adds to a row (64 - 48 bytes).
const bf16cRawStep = 16

// bf16cMaxSize is the largest serialised BF16C form of a rows x cols
// matrix (every full block raw).
func bf16cMaxSize(rows, cols int64) int64 {
	_, hi := bf16cRowBounds(cols)
	return 8*(rows+1) + rows*hi
}

// checkBF16CSize refuses a BF16C tensor entry whose shape or stored size
// cannot be the serialised form of such a matrix: Rows+1 8-byte offsets,
// then rows of at least the all-compressed and at most the all-raw length,
// each raw block adding 16 bytes.
func checkBF16CSize(t *Tensor) error {
	if len(t.Shape) != 2 {
		return fmt.Errorf("a %s tensor is a matrix, this one has shape %v", BF16C, t.Shape)
	}
	rows, cols := t.Shape[0], t.Shape[1]
	// bounded so that every product below fits an int64 (and an int on
	// 64-bit systems)
	const most = 1 << 40
	if rows < 1 || cols < 1 || rows > most || cols > most {
		return fmt.Errorf("%s shape %v is not a non-empty matrix of at most 2^40 rows and columns", BF16C, t.Shape)
	}
	lo, hi := bf16cRowBounds(cols)
	head := 8 * (rows + 1)
	if h, l := bits.Mul64(uint64(rows), uint64(hi)); h != 0 || l > math.MaxInt64-uint64(head) {
		return fmt.Errorf("%s shape %v is too large", BF16C, t.Shape)
	}
	least, largest := head+rows*lo, head+rows*hi
	switch {
	case t.Size < head:
		return fmt.Errorf("size %d cannot hold the %d row offsets of a %s%v matrix (%d bytes)", t.Size, rows+1, BF16C, t.Shape, head)
	case t.Size < least || t.Size > largest:
		return fmt.Errorf("size %d is outside [%d, %d], the sizes a %s%v matrix can have", t.Size, least, largest, BF16C, t.Shape)
	case (t.Size-least)%bf16cRawStep != 0:
		return fmt.Errorf("size %d is not %d plus a multiple of %d, as every %s%v matrix's is", t.Size, least, bf16cRawStep, BF16C, t.Shape)
	}
	return nil
}

// compressedPlan returns the manifest a pack with compression starts
// from: m (an uncompressed plan) with every Compressible tensor turned
// BF16C at its largest size (its place is known once the runs before it
// are written) and the runs laid out again.
func compressedPlan(m *Manifest) *Manifest {
	c := *m
	c.Compression = BF16C
	c.Runs = make([]Run, len(m.Runs))
	for i := range m.Runs {
		c.Runs[i] = m.Runs[i]
		c.Runs[i].Tensors = make([]Tensor, len(m.Runs[i].Tensors))
		for j, t := range m.Runs[i].Tensors {
			if Compressible(strings.TrimPrefix(t.Name, m.Source.Prefix), safetensors.DType(t.DType), t.Shape) {
				t.DType = BF16C
				t.Size = bf16cMaxSize(t.Shape[0], t.Shape[1])
			}
			c.Runs[i].Tensors[j] = t
		}
	}
	relayout(&c, 0)
	return &c
}

// relayout places runs from..end one after the other from the end of run
// from-1 (tensors at their current sizes, each at the next multiple of
// TensorAlign) and sets TotalBytes.
func relayout(m *Manifest, from int) {
	var off int64
	if from > 0 {
		off = m.Runs[from-1].Offset + m.Runs[from-1].Length
	}
	for i := from; i < len(m.Runs); i++ {
		r := &m.Runs[i]
		var pos int64
		for j := range r.Tensors {
			pos = alignUp(pos, TensorAlign)
			r.Tensors[j].Offset = pos
			pos += r.Tensors[j].Size
		}
		r.Offset, r.DataBytes, r.Length = off, pos, alignUp(pos, RunAlign)
		off += r.Length
	}
	m.TotalBytes = off
}

// A patch is bytes that belong at run offset off but were written as
// zeros: a compressed tensor's row offsets, known only once its rows are,
// after the chunk holding them went to disk.
type patch struct {
	off  int64
	data []byte
}

// patchCRC turns the CRC-32C of a run of n bytes written with zeros at
// p's place into the CRC of the run with p's bytes there. The CRC without
// its pre- and post-conditioning is linear, so the change is the raw CRC
// of p's bytes advanced over the n - (p.off + len(p.data)) bytes after it.
func patchCRC(crc uint32, p patch, n int64) uint32 {
	raw := ^crc32.Update(^uint32(0), castagnoli, p.data)
	return crc ^ crcZeros(raw, n-p.off-int64(len(p.data)))
}

// crcZeros advances a raw (unconditioned) CRC-32C register over n zero
// bytes: the register times the matrix of one zero byte, raised to n by
// squaring (as zlib's crc32_combine does).
func crcZeros(reg uint32, n int64) uint32 {
	var op, sq [32]uint32
	op[0] = crc32.Castagnoli // one zero bit
	for i := 1; i < 32; i++ {
		op[i] = 1 << (i - 1)
	}
	for range 3 { // one zero byte
		gf2Square(&sq, &op)
		op = sq
	}
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			reg = gf2Times(&op, reg)
		}
		gf2Square(&sq, &op)
		op = sq
	}
	return reg
}

func gf2Times(m *[32]uint32, v uint32) uint32 {
	var s uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			s ^= m[i]
		}
	}
	return s
}

func gf2Square(dst, m *[32]uint32) {
	for i := range dst {
		dst[i] = gf2Times(m, m[i])
	}
}

// kindName is how messages call a trunk of either kind.
func kindName(compressed bool) string {
	if compressed {
		return "compressed"
	}
	return "uncompressed"
}

// aKind is kindName with its article.
func aKind(compressed bool) string {
	if compressed {
		return "a compressed"
	}
	return "an uncompressed"
}
