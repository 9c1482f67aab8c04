package kernels

import "fmt"

// Attention over a cache of float32 rows: the scores are contract dot
// products kept in float64 (MatVec64), the output is the probability-
// weighted sum of the rows (WeightedRows). Both are the same at every SIMD
// level (tested bit for bit against these portable loops).

// MatVec64 writes dst[r] = DotF64(x, row r) of a float32 matrix: the
// contract dot products, serial, not rounded to float32 (attention scores).
func MatVec64(dst []float64, m *Mat, x []float32) {
	if m.DType != F32 || len(m.F32) < m.Rows*m.Cols || len(x) < m.Cols || len(dst) < m.Rows {
		panic(fmt.Sprintf("kernels: MatVec64 of a %v %dx%d matrix, x %d, dst %d", m.DType, m.Rows, m.Cols, len(x), len(dst)))
	}
	if simdMatVec64(dst, m, x) {
		return
	}
	c := m.Cols
	for r := 0; r < m.Rows; r++ {
		dst[r] = DotF64(x[:c], m.F32[r*c:(r+1)*c])
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
