package kernels

import "math"

// Sigmoid is 1/(1+e^-x) evaluated in float64 and rounded once.
func Sigmoid(x float32) float32 { return float32(sigmoid64(float64(x))) }

func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// RMSNorm writes dst[i] = w[i] · float32(x[i]/sqrt(mean(x²)+eps)); w nil means
// no weight. The sum of squares follows the dot contract; dst may alias x.
func RMSNorm(dst, x, w []float32, eps float32) {
	n := len(x)
	r := 1 / math.Sqrt(DotF64(x, x)/float64(n)+float64(eps))
	dst = dst[:n]
	if w == nil {
		for i, v := range x {
			dst[i] = float32(float64(v) * r)
		}
		return
	}
	w = w[:n]
	for i, v := range x {
		dst[i] = float32(float64(v)*r) * w[i]
	}
}

// L2Norm scales x in place to unit length: x[i] = float32(x[i]/sqrt(Σx²+eps)).
func L2Norm(x []float32, eps float32) {
	r := 1 / math.Sqrt(DotF64(x, x)+float64(eps))
	for i, v := range x {
		x[i] = float32(float64(v) * r)
	}
}

// SiTU computes the SiTU-GLU: dst[i] = (b1·tanh(g/b1)·sigmoid(g)) · (b2·tanh(u/b2)),
// in float64 from the float32 inputs, rounded once. |dst| < b1·b2.
func SiTU(dst, gate, up []float32, b1, b2 float32) {
	B1, B2 := float64(b1), float64(b2)
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	for i, g := range gate {
		gv := float64(g)
		a := B1 * math.Tanh(gv/B1) * sigmoid64(gv)
		u := B2 * math.Tanh(float64(up[i])/B2)
		dst[i] = float32(a * u)
	}
}

// SiTUPool is SiTU with the elements split among p's workers (384 at a
// time): the values are the same, element by element. One routed expert's
// activations are cheap, but they run for every routed expert of every
// layer, which adds up per token of the full model (BenchmarkSiTU,
// BenchmarkSiTUPool; docs/BENCHMARKS.md).
func SiTUPool(p *Pool, dst, gate, up []float32, b1, b2 float32) {
	n := len(gate)
	up, dst = up[:n], dst[:n]
	p.Rows(n, 384, func(i0, i1 int) {
		SiTU(dst[i0:i1], gate[i0:i1], up[i0:i1], b1, b2)
	})
}

// AttnRes mixes sources by a softmax over their RMS-normalised keys:
// score_j = rms(V_j)^-1 · (V_j · fold), p = softmax(score), dst = Σ_j p_j·V_j
// (values raw). Scores, weights and sums are float64; sums run over j ascending.
func AttnRes(dst []float32, sources [][]float32, fold []float32, eps float32) {
	n := len(dst)
	if len(sources) == 0 {
		clear(dst)
		return
	}
	var sbuf [16]float64
	s := sbuf[:0]
	for _, v := range sources {
		v = v[:n]
		r := 1 / math.Sqrt(DotF64(v, v)/float64(n)+float64(eps))
		s = append(s, r*DotF64(v, fold))
	}
	Softmax64(s)
	// each product is rounded before the add (explicit conversion: never fused)
	for i := simdMix(dst, sources, s); i < n; i++ {
		acc := 0.0
		for j, v := range sources {
			acc += float64(s[j] * float64(v[i]))
		}
		dst[i] = float32(acc)
	}
}

// Softmax64 turns scores into probabilities in place: e^(s-max)/Σ, sums ascending.
func Softmax64(s []float64) {
	m := math.Inf(-1)
	for _, v := range s {
		m = math.Max(m, v)
	}
	z := 0.0
	for j := range s {
		s[j] = math.Exp(s[j] - m)
		z += s[j]
	}
	for j := range s {
		s[j] /= z
	}
}

// Argmax returns the first index of the maximum (NaN never wins).
func Argmax(x []float32) int {
	best := 0
	for i := 1; i < len(x); i++ {
		if x[i] > x[best] {
			best = i
		}
	}
	return best
}
