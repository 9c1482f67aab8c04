package vision

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"k3/kernels"
	st "k3/storage/safetensors"
)

// Block is one encoder layer.
type Block struct {
	Norm0, Norm1 []float32
	QKV, O       kernels.Mat // [3·QKV, D], [D, QKV]
	FC0, FC1     kernels.Mat // [Inter, D], [D, Inter]
}

// Tower holds the vision tower and projector weights.
type Tower struct {
	Cfg    Config
	Patch  kernels.Mat // [D, 3·p·p]: the Conv2d weight, flattened (channel, row, column)
	Pos    []float32   // [PosH, PosW, D]
	Blocks []Block
	Final  []float32
	P0, P2 kernels.Mat // projector [M, M], [TextHidden, M]
	Post   []float32
	Bytes  int64 // weight bytes held
	// stream reads the blocks per picture when they stay on disk
	// (BindStreamed; Blocks is then empty)
	stream *blockStream
}

// TensorNames lists the tower's and projector's tensors in the release's
// naming (docs/VISION.md §2).
func TensorNames(layers int) []string {
	n := []string{"vision_tower.patch_embed.proj.weight", "vision_tower.patch_embed.pos_emb.weight"}
	for i := range layers {
		p := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		n = append(n, p+"norm0.weight", p+"norm1.weight", p+"wqkv.weight", p+"wo.weight", p+"mlp.fc0.weight", p+"mlp.fc1.weight")
	}
	return append(n, "vision_tower.encoder.final_layernorm.weight",
		"mm_projector.proj.0.weight", "mm_projector.proj.2.weight", "mm_projector.post_norm.weight")
}

// Load reads the tower from the model folder dir (config.json and its
// safetensors shards). A model without vision_config gives ErrNoVision.
func Load(dir string) (*Tower, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	set, err := st.OpenPartial(dir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	return Bind(cfg, set)
}

// binder collects every problem so one error names them all.
type binder struct {
	set   *st.Set
	errs  []string
	bytes int64
}

func (b *binder) tensor(name string, shape ...int) *st.Tensor {
	t, ok := b.set.Get(name)
	if !ok {
		b.errs = append(b.errs, fmt.Sprintf("missing %s %v", name, shape))
		return nil
	}
	same := len(t.Shape) == len(shape)
	for i := 0; same && i < len(shape); i++ {
		same = t.Shape[i] == int64(shape[i])
	}
	if !same {
		b.errs = append(b.errs, fmt.Sprintf("%s has shape %v, want %v", name, t.Shape, shape))
		return nil
	}
	if t.DType != st.BF16 && t.DType != st.F32 {
		b.errs = append(b.errs, fmt.Sprintf("%s is %s, want BF16 or F32", name, t.DType))
		return nil
	}
	return t
}

func (b *binder) vec(name string, shape ...int) []float32 {
	t := b.tensor(name, shape...)
	if t == nil {
		return nil
	}
	v := make([]float32, t.Numel())
	if err := b.set.ReadFloat32(t, v); err != nil {
		b.errs = append(b.errs, err.Error())
		return nil
	}
	b.bytes += int64(4 * len(v))
	return v
}

// mat binds a matrix [rows, cols]; shape is the stored shape when it is not
// [rows, cols] (the patch embedding's Conv2d weight is 4-D). The matrix is
// read into old's storage when it has the room (a streamed block's buffer).
func (b *binder) mat(name string, rows, cols int, old kernels.Mat, shape ...int) kernels.Mat {
	m := kernels.Mat{Rows: rows, Cols: cols}
	if shape == nil {
		shape = []int{rows, cols}
	}
	t := b.tensor(name, shape...)
	if t == nil {
		return m
	}
	var raw []byte
	switch {
	case old.DType == kernels.BF16 && t.DType == st.BF16 && int64(2*len(old.BF16)) >= t.Size:
		raw = unsafe.Slice((*byte)(unsafe.Pointer(&old.BF16[0])), t.Size)
	case old.DType == kernels.F32 && t.DType == st.F32 && int64(4*len(old.F32)) >= t.Size:
		raw = unsafe.Slice((*byte)(unsafe.Pointer(&old.F32[0])), t.Size)
	default:
		w := make([]uint64, (t.Size+7)/8)
		raw = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), t.Size)
	}
	if err := b.set.ReadTensor(t, raw); err != nil {
		b.errs = append(b.errs, err.Error())
		return m
	}
	b.bytes += t.Size
	if t.DType == st.BF16 {
		m.DType, m.BF16 = kernels.BF16, unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), rows*cols)
	} else {
		m.DType, m.F32 = kernels.F32, unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), rows*cols)
	}
	return m
}

// block binds encoder layer i, into old's storage where it has the room.
func (b *binder) block(c *Config, i int, old Block) Block {
	p := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
	D := c.Hidden
	return Block{
		Norm0: b.vecInto(p+"norm0.weight", old.Norm0, D), Norm1: b.vecInto(p+"norm1.weight", old.Norm1, D),
		QKV: b.mat(p+"wqkv.weight", 3*c.QKV, D, old.QKV), O: b.mat(p+"wo.weight", D, c.QKV, old.O),
		FC0: b.mat(p+"mlp.fc0.weight", c.Inter, D, old.FC0), FC1: b.mat(p+"mlp.fc1.weight", D, c.Inter, old.FC1),
	}
}

// vecInto is vec read into old when it has the length.
func (b *binder) vecInto(name string, old []float32, shape ...int) []float32 {
	if len(old) == 0 {
		return b.vec(name, shape...)
	}
	t := b.tensor(name, shape...)
	if t == nil {
		return nil
	}
	if int64(len(old)) != t.Numel() {
		return b.vec(name, shape...)
	}
	if err := b.set.ReadFloat32(t, old); err != nil {
		b.errs = append(b.errs, err.Error())
		return nil
	}
	b.bytes += int64(4 * len(old))
	return old
}

// Bind reads the tower's tensors from an opened checkpoint.
func Bind(cfg *Config, set *st.Set) (*Tower, error) { return bind(cfg, set, false) }

// BindStreamed binds a tower whose encoder blocks stay on disk: Embed reads
// each block from set just before it runs, into one block's buffers, so
// the tower holds the patch and position tables, the projector and one
// block (Config.StreamedBytes) instead of all of it, and reads the blocks
// once per picture. Every block's tensors are checked (names, shapes,
// types) now. set must stay open while the tower is used.
func BindStreamed(cfg *Config, set *st.Set) (*Tower, error) { return bind(cfg, set, true) }

func bind(cfg *Config, set *st.Set, streamed bool) (*Tower, error) {
	b := &binder{set: set}
	c := *cfg
	D, M := c.Hidden, c.MergedDim()
	t := &Tower{Cfg: c}
	t.Patch = b.mat("vision_tower.patch_embed.proj.weight", D, c.PatchDim(), kernels.Mat{}, D, 3, c.Patch, c.Patch)
	t.Pos = b.vec("vision_tower.patch_embed.pos_emb.weight", c.PosH, c.PosW, D)
	for i := range c.Layers {
		if !streamed {
			t.Blocks = append(t.Blocks, b.block(&c, i, Block{}))
			continue
		}
		p := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		b.tensor(p+"norm0.weight", D)
		b.tensor(p+"norm1.weight", D)
		b.tensor(p+"wqkv.weight", 3*c.QKV, D)
		b.tensor(p+"wo.weight", D, c.QKV)
		b.tensor(p+"mlp.fc0.weight", c.Inter, D)
		b.tensor(p+"mlp.fc1.weight", D, c.Inter)
	}
	t.Final = b.vec("vision_tower.encoder.final_layernorm.weight", D)
	t.P0 = b.mat("mm_projector.proj.0.weight", M, M, kernels.Mat{})
	t.P2 = b.mat("mm_projector.proj.2.weight", c.TextHidden, M, kernels.Mat{})
	t.Post = b.vec("mm_projector.post_norm.weight", c.TextHidden)
	if streamed && len(b.errs) == 0 {
		t.stream = &blockStream{set: set}
		t.stream.buf = b.block(&c, 0, Block{}) // the one block's buffers
	}
	if len(b.errs) > 0 {
		if len(b.errs) > 8 {
			b.errs = append(b.errs[:8], fmt.Sprintf("and %d more", len(b.errs)-8))
		}
		return nil, fmt.Errorf("vision tower: %s", strings.Join(b.errs, "; "))
	}
	t.Bytes = b.bytes
	return t, nil
}

// blockStream reads a streamed tower's blocks, one at a time, into buf.
type blockStream struct {
	mu    sync.Mutex // one picture at a time uses buf
	set   *st.Set
	buf   Block
	bytes int64 // block bytes read so far
}

// read reads block i into the buffer.
func (s *blockStream) read(c *Config, i int) (*Block, error) {
	b := &binder{set: s.set}
	s.buf = b.block(c, i, s.buf)
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("vision tower, block %d: %s", i, strings.Join(b.errs, "; "))
	}
	s.bytes += b.bytes
	return &s.buf, nil
}

// Streamed reports whether the tower's blocks stay on disk (BindStreamed).
func (t *Tower) Streamed() bool { return t.stream != nil }

// BytesRead is what the streamed tower has read of its blocks so far
// (0 when resident).
func (t *Tower) BytesRead() int64 {
	if t.stream == nil {
		return 0
	}
	t.stream.mu.Lock()
	defer t.stream.mu.Unlock()
	return t.stream.bytes
}
