//go:build amd64 || arm64

package kernels

import (
	"math"
	"sync"
)

// Pieces the SIMD drivers of every architecture share (accel_amd64.go,
// accel_arm64.go).

// allFinite reports whether no value is Inf or NaN.
func allFinite(x []float32) bool {
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return false
		}
	}
	return true
}

// finishRow adds the columns [n8, Cols) that the kernels leave to Go (fewer
// than 8, into lanes 0..) and combines the lanes, rounded to float32.
func (m *Mat) finishRow(l *[Lanes]float64, r, n8 int, x []float32) float32 {
	return float32(m.finishRow64(l, r, n8, x))
}

// finishRow64 is finishRow without the final rounding.
func (m *Mat) finishRow64(l *[Lanes]float64, r, n8 int, x []float32) float64 {
	for i := n8; i < m.Cols; i++ {
		l[i-n8] += m.weight64(r, i) * float64(x[i])
	}
	return combine(l)
}

// rowKernelMaxT is the largest token count that runs on the row kernels
// (one mat-vec per token over each block of rows, whose weights stay in L1/L2
// after the first token) rather than on the decode-and-gemm path: AVX-512
// and NEON. AVX2 runs T >= 2 on its small-batch path (batch_amd64.go).
const rowKernelMaxT = 8

// Blocking of the mat-mat path: a panel of panelRows output rows is computed
// in column blocks of kBlock; each block of 6 rows is decoded once to float64
// and multiplied with every token by the register-tiled micro-kernel.
const (
	panelRows = 48
	kBlock    = 512
	wStride   = kBlock + 8 // float64s between decoded rows (breaks 4 KiB aliasing)
)

type gemmScratch struct {
	w   [6 * wStride]float64
	acc []float64
}

var gemmPool = sync.Pool{New: func() any { return new(gemmScratch) }}

// gemmArgs is the argument block of the gemm micro-kernels; the assembly
// relies on the offsets noted.
type gemmArgs struct {
	w         [6]*float64 // 0: decoded weight rows
	x         [4]*float64 // 48: widened activations, one row per token
	acc       *float64    // 80: lanes of weight row r, token t at acc[r*accStride/8+t*8:][:8]
	accStride int         // 88: bytes (not float64s) between consecutive weight rows' lanes
}
