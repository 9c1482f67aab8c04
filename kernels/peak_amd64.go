package kernels

func fmaLoop(l Level, iters int) int64 {
	switch l {
	case LevelAVX512:
		fmaLoopAVX512(iters)
		return int64(iters) * 12 * 8 * 2
	case LevelAVX2:
		fmaLoopAVX2(iters)
		return int64(iters) * 12 * 4 * 2
	}
	return 0
}

// fmaLoopAVX2 executes 12*n VFMADD231PD on ymm registers, 12 independent
// accumulators; nothing is read or written.
//
//go:noescape
func fmaLoopAVX2(n int)

// fmaLoopAVX512 is fmaLoopAVX2 on zmm registers.
//
//go:noescape
func fmaLoopAVX512(n int)
