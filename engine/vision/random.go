package vision

import (
	"math"
	"math/rand/v2"

	"k3/kernels"
)

// Random is a tower of the given shape with random bf16 weights (scaled by
// 1/sqrt(fan-in), unit norms): the released shapes without the released
// weights, for measuring time (k3 bench vision). Deterministic in seed.
func Random(c Config, seed uint64) *Tower {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	mat := func(rows, cols int) kernels.Mat {
		s := 1 / math.Sqrt(float64(cols))
		w := make([]uint16, rows*cols)
		for i := range w {
			w[i] = kernels.F32ToBF16(float32(r.NormFloat64() * s))
		}
		return kernels.Mat{DType: kernels.BF16, Rows: rows, Cols: cols, BF16: w}
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	D, M := c.Hidden, c.MergedDim()
	t := &Tower{Cfg: c, Patch: mat(D, c.PatchDim()), Final: ones(D), Post: ones(c.TextHidden)}
	t.Pos = make([]float32, c.PosH*c.PosW*D)
	for i := range t.Pos {
		t.Pos[i] = float32(0.02 * r.NormFloat64())
	}
	for range c.Layers {
		t.Blocks = append(t.Blocks, Block{Norm0: ones(D), Norm1: ones(D), QKV: mat(3*c.QKV, D), O: mat(D, c.QKV),
			FC0: mat(c.Inter, D), FC1: mat(D, c.Inter)})
	}
	t.P0, t.P2 = mat(M, M), mat(c.TextHidden, M)
	t.Bytes = c.WeightBytes()
	return t
}

// Released is the released Kimi K3 vision_config (docs/VISION.md §1).
func Released() Config {
	return Config{Hidden: 1024, Inter: 4096, Layers: 27, Heads: 12, QKV: 1536, HeadDim: 128, Patch: 14,
		PosH: 64, PosW: 64, MergeH: 2, MergeW: 2, TextHidden: 7168, ProjEps: 1e-5}
}
