package kernels

// simdMatMulBF16C is MatMul of a BF16C matrix on the SIMD path; false means
// "use the portable path".
func simdMatMulBF16C(p *Pool, dst []float32, m *Mat, x []float32, T int) bool {
	return false
}
