package vision

import (
	"context"
	"math"

	"k3/kernels"
)

// bilinear is one output index's two taps along an axis of size in resized
// to out: PyTorch's F.interpolate(mode="bilinear", align_corners=False)
// without antialias (docs/VISION.md §3.2).
type tap struct {
	i0, i1 int
	w0, w1 float64
}

func taps(in, out int) []tap {
	scale := float64(in) / float64(out)
	ts := make([]tap, out)
	for o := range ts {
		src := scale*(float64(o)+0.5) - 0.5
		if src < 0 {
			src = 0
		}
		i0 := min(int(src), in-1)
		i1 := i0
		if i0 < in-1 {
			i1 = i0 + 1
		}
		l1 := min(max(src-float64(i0), 0), 1)
		ts[o] = tap{i0, i1, 1 - l1, l1}
	}
	return ts
}

// addPositions adds the learned position table, resampled to the grid, to
// x [N, D]. The resampled value is formed in float64 and rounded once.
func addPositions(x, pos []float32, c *Config, g Grid) {
	D := c.Hidden
	if g.H == c.PosH && g.W == c.PosW {
		addInto(x, pos[:g.Patches()*D])
		return
	}
	ty, tx := taps(c.PosH, g.H), taps(c.PosW, g.W)
	at := func(y, x, d int) float64 { return float64(pos[(y*c.PosW+x)*D+d]) }
	for i, a := range ty {
		for j, b := range tx {
			row := x[(i*g.W+j)*D : (i*g.W+j+1)*D]
			for d := range row {
				v := a.w0*(b.w0*at(a.i0, b.i0, d)+b.w1*at(a.i0, b.i1, d)) +
					a.w1*(b.w0*at(a.i1, b.i0, d)+b.w1*at(a.i1, b.i1, d))
				row[d] += float32(v)
			}
		}
	}
}

// ropeTable is [N, headDim/2] angles: pair 2j of a head turns by x·f_j and
// pair 2j+1 by y·f_j, f_j = theta^(-4j/headDim), for the patch at row y,
// column x (docs/VISION.md §3.3).
func ropeTable(g Grid, headDim int) []float64 {
	n := headDim / 4
	f := make([]float64, n)
	for j := range f {
		f[j] = 1 / math.Pow(RopeTheta, float64(4*j)/float64(headDim))
	}
	a := make([]float64, 0, g.Patches()*2*n)
	for y := 0; y < g.H; y++ {
		for x := 0; x < g.W; x++ {
			for j := range n {
				a = append(a, float64(x)*f[j], float64(y)*f[j])
			}
		}
	}
	return a
}

// applyRope turns q and k of every head of every patch in qkv [N, 3·QKV]
// (q, then k, then v; each head-major) in float64, rounding once.
func applyRope(qkv []float32, rope []float64, N int, c *Config) {
	half := c.HeadDim / 2
	for r := 0; r < N; r++ {
		ang := rope[r*half : (r+1)*half]
		row := qkv[r*3*c.QKV : r*3*c.QKV+2*c.QKV] // q and k
		for h := 0; h < 2*c.Heads; h++ {
			v := row[h*c.HeadDim : (h+1)*c.HeadDim]
			for m, th := range ang {
				s, co := math.Sincos(th)
				a, b := float64(v[2*m]), float64(v[2*m+1])
				v[2*m], v[2*m+1] = float32(a*co-b*s), float32(a*s+b*co)
			}
		}
	}
}

// attention is full (non-causal) multi-head attention over one image's
// patches: out [N, QKV]. Scores are contract dot products in float64 times
// headDim^-0.5, the softmax is float64, and each output row is the
// weighted sum of the value rows (kernels.WeightedRows). Rows are
// independent, so the pool's split never changes a bit.
func attention(ctx context.Context, p *kernels.Pool, out, qkv []float32, N int, c *Config) {
	hd, H := c.HeadDim, c.Heads
	ks := make([]kernels.Mat, H)
	vs := make([][]float32, H)
	for h := range H {
		k := make([]float32, N*hd)
		v := make([]float32, N*hd)
		for r := 0; r < N; r++ {
			base := r * 3 * c.QKV
			copy(k[r*hd:], qkv[base+c.QKV+h*hd:base+c.QKV+(h+1)*hd])
			copy(v[r*hd:], qkv[base+2*c.QKV+h*hd:base+2*c.QKV+(h+1)*hd])
		}
		ks[h] = kernels.Mat{DType: kernels.F32, Rows: N, Cols: hd, F32: k}
		vs[h] = v
	}
	scale := 1 / math.Sqrt(float64(hd))
	p.Rows(H*N, max(1, 64/max(1, N/256)), func(r0, r1 int) {
		if ctx.Err() != nil {
			return // cancelled: the caller discards the block
		}
		sc := make([]float64, N)
		for i := r0; i < r1; i++ {
			h, r := i/N, i%N
			q := qkv[r*3*c.QKV+h*hd : r*3*c.QKV+(h+1)*hd]
			kernels.MatVec64(sc, &ks[h], q)
			for j := range sc {
				sc[j] *= scale
			}
			kernels.Softmax64(sc)
			kernels.WeightedRows(out[r*c.QKV+h*hd:r*c.QKV+(h+1)*hd], sc, vs[h], hd)
		}
	})
}
