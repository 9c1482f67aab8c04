package kernels

import "fmt"

// Attention over a cache of float32 rows (row s at rows[s*stride:]): the
// scores are contract dot products kept in float64, the output is the
// probability-weighted sum of the rows. Both are the same at every SIMD
// level (tested bit for bit against these portable loops).

// DotRowsF64 writes dst[s] = DotF64(x, row s) for s < len(dst), each row
// being rows[s*stride : s*stride+len(x)].
func DotRowsF64(dst []float64, rows []float32, stride int, x []float32) {
	n := len(x)
	if len(dst) == 0 || n == 0 {
		clear(dst) // an empty dot product is +0
		return
	}
	checkStride(stride)
	_ = rows[(len(dst)-1)*stride+n-1]
	for s := simdDotRows(dst, rows, stride, x); s < len(dst); s++ {
		dst[s] = DotF64(x, rows[s*stride:s*stride+n])
	}
}

// WeightedRows writes dst[j] = float32(Σ_s p[s]·row_s[j]) for j < len(dst),
// row s being rows[s*stride:]. Each sum is float64 from +0 over s
// ascending, and each product is rounded before it is added (never fused).
func WeightedRows(dst []float32, p []float64, rows []float32, stride int) {
	m := len(dst)
	if len(p) == 0 {
		clear(dst) // an empty sum is +0
		return
	}
	if m == 0 {
		return
	}
	checkStride(stride)
	_ = rows[(len(p)-1)*stride+m-1]
	j0 := simdWeightedRows(dst, p, rows, stride)
	if j0 == m {
		return
	}
	ab := getF64(m - j0)
	acc := *ab
	clear(acc)
	for s, ps := range p {
		for j, v := range rows[s*stride+j0 : s*stride+m] {
			acc[j] += float64(ps * float64(v))
		}
	}
	for j, a := range acc {
		dst[j0+j] = float32(a)
	}
	putF64(ab)
}

// checkStride guards the assembly: with a negative stride, checking the
// last row's bounds would not cover the others.
func checkStride(stride int) {
	if stride < 0 {
		panic(fmt.Sprintf("kernels: negative row stride %d", stride))
	}
}
