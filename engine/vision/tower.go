package vision

import (
	"context"
	"fmt"
	"math"

	"k3/kernels"
)

// Grid is an image's patch grid: H rows and W columns of patches.
type Grid struct{ H, W int }

// Patches is the number of patches.
func (g Grid) Patches() int { return g.H * g.W }

// Tokens is the number of image tokens the merge leaves for a grid.
func (c *Config) Tokens(g Grid) int { return (g.H / c.MergeH) * (g.W / c.MergeW) }

// Embed runs the tower and the projector over one image: patches holds the
// image's g.Patches() normalised patches, row-major, each flattened
// (channel, row, column). It returns Tokens(g) rows of TextHidden values.
// p runs the matrix products (nil: on the caller); ctx is checked between
// blocks.
func (t *Tower) Embed(ctx context.Context, p *kernels.Pool, patches []float32, g Grid) ([]float32, error) {
	return t.EmbedProgress(ctx, p, patches, g, nil)
}

// EmbedProgress is Embed calling progress(done, layers) before the first
// block (done 0) and after each one; ctx is checked before every block
// (and inside the attention), so a cancelled picture stops within a
// layer. A streamed tower (BindStreamed) reads each block just before it
// runs.
func (t *Tower) EmbedProgress(ctx context.Context, p *kernels.Pool, patches []float32, g Grid, progress func(done, layers int)) ([]float32, error) {
	c := &t.Cfg
	N := g.Patches()
	if g.H <= 0 || g.W <= 0 || g.H%c.MergeH != 0 || g.W%c.MergeW != 0 {
		return nil, fmt.Errorf("vision: a %dx%d patch grid does not divide into %dx%d merges", g.H, g.W, c.MergeH, c.MergeW)
	}
	if len(patches) != N*c.PatchDim() {
		return nil, fmt.Errorf("vision: %d patch values for a %dx%d grid of %d-value patches", len(patches), g.H, g.W, c.PatchDim())
	}
	if progress == nil {
		progress = func(int, int) {}
	}
	if t.stream != nil {
		t.stream.mu.Lock()
		defer t.stream.mu.Unlock()
	}
	x := make([]float32, N*c.Hidden)
	kernels.MatMul(p, x, &t.Patch, patches, N)
	addPositions(x, t.Pos, c, g)
	rope := ropeTable(g, c.HeadDim)
	s := newScratch(c, N)
	progress(0, c.Layers)
	for i := range c.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := t.blockAt(i)
		if err != nil {
			return nil, err
		}
		if err := t.block(ctx, p, b, x, rope, s, N); err != nil {
			return nil, err
		}
		progress(i+1, c.Layers)
	}
	rmsRows(x, t.Final, c.Hidden, NormEps)
	merged := merge(x, c, g)
	return t.project(p, merged, c.Tokens(g)), nil
}

// blockAt is encoder layer i: held, or read from disk when streamed.
func (t *Tower) blockAt(i int) (*Block, error) {
	if t.stream == nil {
		return &t.Blocks[i], nil
	}
	return t.stream.read(&t.Cfg, i)
}

// scratch holds one image's per-block buffers.
type scratch struct {
	h, qkv, att, o, u []float32
}

func newScratch(c *Config, N int) *scratch {
	return &scratch{
		h:   make([]float32, N*c.Hidden),
		qkv: make([]float32, N*3*c.QKV),
		att: make([]float32, N*c.QKV),
		o:   make([]float32, N*c.Hidden),
		u:   make([]float32, N*c.Inter),
	}
}

// block is one pre-norm encoder layer, updating x [N, D] in place. A
// cancelled ctx stops it between its steps and inside the attention.
func (t *Tower) block(ctx context.Context, p *kernels.Pool, b *Block, x []float32, rope []float64, s *scratch, N int) error {
	c := &t.Cfg
	D := c.Hidden
	if err := ctx.Err(); err != nil {
		return err
	}
	copy(s.h, x)
	rmsRows(s.h, b.Norm0, D, NormEps)
	kernels.MatMul(p, s.qkv, &b.QKV, s.h, N)
	applyRope(s.qkv, rope, N, c)
	attention(ctx, p, s.att, s.qkv, N, c)
	if err := ctx.Err(); err != nil {
		return err
	}
	kernels.MatMul(p, s.o, &b.O, s.att, N)
	addInto(x, s.o)
	copy(s.h, x)
	rmsRows(s.h, b.Norm1, D, NormEps)
	kernels.MatMul(p, s.u, &b.FC0, s.h, N)
	for i, v := range s.u {
		s.u[i] = geluTanh(v)
	}
	kernels.MatMul(p, s.o, &b.FC1, s.u, N)
	addInto(x, s.o)
	return nil
}

// project is patchmergerv2: RMSNorm(W2 · gelu(W0 · m)), T rows.
func (t *Tower) project(p *kernels.Pool, m []float32, T int) []float32 {
	c := &t.Cfg
	y := make([]float32, T*c.MergedDim())
	kernels.MatMul(p, y, &t.P0, m, T)
	for i, v := range y {
		y[i] = geluErf(v)
	}
	z := make([]float32, T*c.TextHidden)
	kernels.MatMul(p, z, &t.P2, y, T)
	rmsRows(z, t.Post, c.TextHidden, c.ProjEps)
	return z
}

func addInto(x, d []float32) {
	for i, v := range d {
		x[i] += v
	}
}

func rmsRows(x, w []float32, n int, eps float32) {
	for r := 0; r < len(x); r += n {
		kernels.RMSNorm(x[r:r+n], x[r:r+n], w, eps)
	}
}

// geluTanh is the tanh GELU (gelu_pytorch_tanh), in float64, rounded once.
func geluTanh(v float32) float32 {
	x := float64(v)
	return float32(0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
}

// geluErf is the exact GELU (nn.GELU()), in float64, rounded once.
func geluErf(v float32) float32 {
	x := float64(v)
	return float32(0.5 * x * (1 + math.Erf(x/math.Sqrt2)))
}

// merge is sd2_tpool for one frame: token (i, j) concatenates the patches
// (kh·i+a, kw·j+b) for a < kh, b < kw in that order.
func merge(x []float32, c *Config, g Grid) []float32 {
	D, kh, kw := c.Hidden, c.MergeH, c.MergeW
	out := make([]float32, 0, len(x))
	for i := 0; i < g.H/kh; i++ {
		for j := 0; j < g.W/kw; j++ {
			for a := 0; a < kh; a++ {
				for b := 0; b < kw; b++ {
					r := (kh*i+a)*g.W + kw*j + b
					out = append(out, x[r*D:(r+1)*D]...)
				}
			}
		}
	}
	return out
}
