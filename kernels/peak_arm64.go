package kernels

func fmaLoop(l Level, iters int) int64 {
	if l != LevelNEON {
		return 0
	}
	fmaLoopNEON(iters)
	return int64(iters) * 12 * 2 * 2
}

// fmaLoopNEON executes 12*n FMLA (2 x float64) with 12 independent
// accumulators; nothing is read or written.
//
//go:noescape
func fmaLoopNEON(n int)
