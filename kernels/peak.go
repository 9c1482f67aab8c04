package kernels

// FMALoop runs iters blocks of independent float64 fused multiply-adds on
// the vectors of the current level (the 8 contract lanes' registers: ymm
// on AVX2, zmm on AVX-512, 2 x float64 on NEON), twelve accumulators deep so
// that the FMA latency is hidden, with no memory traffic: the machine's
// float64 FMA peak for one thread, the limit of the exact kernels (one
// float64 FMA per weight and token). It returns the floating-point
// operations done (2 per lane per FMA), or 0 on the portable level, which
// has no such loop.
func FMALoop(iters int) int64 {
	if iters <= 0 {
		return 0
	}
	return fmaLoop(CurrentLevel(), iters)
}
