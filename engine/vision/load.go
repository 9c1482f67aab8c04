package vision

import (
	"fmt"
	"strings"
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
// [rows, cols] (the patch embedding's Conv2d weight is 4-D).
func (b *binder) mat(name string, rows, cols int, shape ...int) kernels.Mat {
	m := kernels.Mat{Rows: rows, Cols: cols}
	if shape == nil {
		shape = []int{rows, cols}
	}
	t := b.tensor(name, shape...)
	if t == nil {
		return m
	}
	w := make([]uint64, (t.Size+7)/8)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), t.Size)
	if err := b.set.ReadTensor(t, raw); err != nil {
		b.errs = append(b.errs, err.Error())
		return m
	}
	b.bytes += t.Size
	if t.DType == st.BF16 {
		m.DType, m.BF16 = kernels.BF16, unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), rows*cols)
	} else {
		m.DType, m.F32 = kernels.F32, unsafe.Slice((*float32)(unsafe.Pointer(&w[0])), rows*cols)
	}
	return m
}

// Bind reads the tower's tensors from an opened checkpoint.
func Bind(cfg *Config, set *st.Set) (*Tower, error) {
	b := &binder{set: set}
	c := *cfg
	D, M := c.Hidden, c.MergedDim()
	t := &Tower{Cfg: c}
	t.Patch = b.mat("vision_tower.patch_embed.proj.weight", D, c.PatchDim(), D, 3, c.Patch, c.Patch)
	t.Pos = b.vec("vision_tower.patch_embed.pos_emb.weight", c.PosH, c.PosW, D)
	for i := range c.Layers {
		p := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		t.Blocks = append(t.Blocks, Block{
			Norm0: b.vec(p+"norm0.weight", D), Norm1: b.vec(p+"norm1.weight", D),
			QKV: b.mat(p+"wqkv.weight", 3*c.QKV, D), O: b.mat(p+"wo.weight", D, c.QKV),
			FC0: b.mat(p+"mlp.fc0.weight", c.Inter, D), FC1: b.mat(p+"mlp.fc1.weight", D, c.Inter),
		})
	}
	t.Final = b.vec("vision_tower.encoder.final_layernorm.weight", D)
	t.P0 = b.mat("mm_projector.proj.0.weight", M, M)
	t.P2 = b.mat("mm_projector.proj.2.weight", c.TextHidden, M)
	t.Post = b.vec("mm_projector.post_norm.weight", c.TextHidden)
	if len(b.errs) > 0 {
		if len(b.errs) > 8 {
			b.errs = append(b.errs[:8], fmt.Sprintf("and %d more", len(b.errs)-8))
		}
		return nil, fmt.Errorf("vision tower: %s", strings.Join(b.errs, "; "))
	}
	t.Bytes = b.bytes
	return t, nil
}
