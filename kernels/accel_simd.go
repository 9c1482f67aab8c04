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

// finishPanel finishes the rows r0..r1-1 of a gemm panel for each of the T
// tokens (finishRow on their lanes in acc, Tp tokens a row) into dst, laid
// out token-major (dst[t*Rows+row]).
func (m *Mat) finishPanel(dst []float32, acc []float64, x []float32, T, Tp, r0, r1 int) {
	n, n8, ldd := m.Cols, m.Cols&^7, m.Rows
	for i := 0; i < r1-r0; i++ {
		for t := 0; t < T; t++ {
			l := (*[Lanes]float64)(acc[(i*Tp+t)*Lanes:])
			dst[t*ldd+r0+i] = m.finishRow(l, r0+i, n8, x[t*n:(t+1)*n])
		}
	}
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

// zeroAcc is n zeroed accumulators, reusing the scratch's buffer.
func (sc *gemmScratch) zeroAcc(n int) []float64 {
	if cap(sc.acc) < n {
		sc.acc = make([]float64, n)
	}
	acc := sc.acc[:n]
	clear(acc)
	return acc
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

// gemmRun is the driver every mat-mat path shares: it widens the first n
// activations of each of T tokens to float64 (rows of xs = n+8 float64s,
// which breaks 4 KiB aliasing; tokens T..Tp-1 zero), then hands panels of
// panelRows output rows to the pool, each with a gemmScratch of its own.
// A pool without workers hands over all rows at once: the panels (and
// their accumulators) stay at panelRows all the same.
func gemmRun(p *Pool, rows, n, cols int, x []float32, T, Tp int, panel func(sc *gemmScratch, xd []float64, xs, r0, r1 int)) {
	xs := n + 8
	xb := getF64(Tp * xs)
	xd := *xb
	for t := 0; t < Tp; t++ {
		row := xd[t*xs : (t+1)*xs]
		if t >= T {
			clear(row)
			continue
		}
		for i, v := range x[t*cols : t*cols+n] {
			row[i] = float64(v)
		}
	}
	p.Rows(rows, panelRows, func(r0, r1 int) {
		sc := gemmPool.Get().(*gemmScratch)
		for r := r0; r < r1; r += panelRows {
			panel(sc, xd, xs, r, min(r+panelRows, r1))
		}
		gemmPool.Put(sc)
	})
	putF64(xb)
}

// mxTopTab[s] holds the top 16 bits of the float64 E2M1[c]*2^(s-127) for
// the 16 codes c of scale s (the only bits an MXFP4 weight has as a
// float64): bytes 0-15 the low and 16-31 the high byte, all zero for the
// NaN scale 255. The AVX2 kernels look them up with VPSHUFB, the NEON ones
// with TBL. Built from E2M1 rather than copied from mxTable: this init may
// run before mxfp4.go's.
var mxTopTab [256][32]byte

func init() {
	for s := 0; s < 255; s++ {
		for c := 0; c < 16; c++ {
			v := E2M1[c&7] * math.Ldexp(1, s-127)
			if c&8 != 0 {
				v = -v
			}
			top := math.Float64bits(v) >> 48
			mxTopTab[s][c] = byte(top)
			mxTopTab[s][16+c] = byte(top >> 8)
		}
	}
}
