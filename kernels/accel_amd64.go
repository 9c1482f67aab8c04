package kernels

import (
	"math"
	"unsafe"
)

// Tables shared by the MXFP4 kernels.
var (
	pow2Tab  [256]float64 // 2^(s-127); 0 for the NaN scale 255
	mxShifts = [8]uint64{0, 4, 8, 12, 16, 20, 24, 28}
)

func init() {
	for s := 0; s < 255; s++ {
		pow2Tab[s] = math.Ldexp(1, s-127)
	}
	// mxTable, 64-byte aligned: each 64-byte half of a row is then one cache
	// line (loads split across two lines slow the row kernel markedly;
	// docs/BENCHMARKS.md). Built here rather than copied: this init runs
	// before mxfp4.go's.
	buf := make([]float64, 256*16+8)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & 63 / 8)
	mxTab = (*[256][16]float64)(unsafe.Pointer(&buf[off]))
	for s := 0; s < 255; s++ {
		for c := 0; c < 16; c++ {
			v := E2M1[c&7] * math.Ldexp(1, s-127)
			if c&8 != 0 {
				v = -v
			}
			mxTab[s][c] = v
		}
	}
}

// mxTab is mxTable, 64-byte aligned, for the MXFP4 row kernel.
var mxTab *[256][16]float64

func newMxArgs() mxArgs {
	return mxArgs{pow2: &pow2Tab, e2m1: &E2M1, shifts: mxShifts, tab: mxTab}
}

// simdMatMul is MatMul on the SIMD path; false means "use the portable path".
func simdMatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) bool {
	lvl := CurrentLevel()
	if lvl == LevelPortable {
		return false
	}
	if m.DType == BF16C {
		return simdMatMulBF16C(p, dst, m, x, T)
	}
	n := m.Cols
	n8 := n &^ 7
	if n8 == 0 || m.Rows == 0 || T <= 0 {
		return false
	}
	if m.DType == MXFP4 && !allFinite(x[:T*n]) {
		// the kernels turn NaN-scale groups into zero products, which only
		// equals skipping them for finite activations
		return false
	}
	if lvl == LevelAVX2 && (T > 1 || m.DType == MXFP4) {
		matMulAVX2(p, dst, m, x, T)
		return true
	}
	if T <= rowKernelMaxT {
		matVecSIMD(p, dst, m, x, T, lvl)
		return true
	}
	matMulSIMD(p, dst, m, x, T)
	return true
}

// matVecSIMD streams the rows through the fused row kernels; with T > 1 each
// block of rows is multiplied with every token while it is in cache.
func matVecSIMD(p *Pool, dst []float32, m *Mat, x []float32, T int, lvl Level) {
	n := m.Cols
	n8 := n &^ 7
	xb := getF64(T * n8)
	xd := *xb
	scale := 1.0
	if m.DType == BF16 && lvl == LevelAVX512 {
		scale = 0x1p896 // the integer bf16 decode yields w*2^-896; see BF16ISTEP
	}
	for t := 0; t < T; t++ {
		xt := xd[t*n8 : (t+1)*n8]
		for i, v := range x[t*n : t*n+n8] {
			xt[i] = float64(v) * scale
		}
	}
	inflight := 8
	if lvl == LevelAVX2 {
		inflight = 4
	}
	chunk := rowChunk(m, p.Threads())
	chunk = max(inflight, chunk/inflight*inflight)
	ldd := m.Rows
	p.Rows(m.Rows, chunk, func(r0, r1 int) {
		var acc [64]float64
		for r := r0; r < r1; r += inflight {
			k := min(inflight, r1-r)
			for t := 0; t < T; t++ {
				xt := x[t*n : (t+1)*n]
				out := dst[t*ldd : (t+1)*ldd]
				if !m.rowsSIMD(lvl, r, k, xd[t*n8:(t+1)*n8], n8, &acc) {
					for j := 0; j < k; j++ {
						out[r+j] = m.RowDot(r+j, xt)
					}
					continue
				}
				for j := 0; j < k; j++ {
					out[r+j] = m.finishRow((*[Lanes]float64)(acc[j*Lanes:]), r+j, n8, xt)
				}
			}
		}
	})
	putF64(xb)
}

// rowsSIMD runs one row kernel on rows [r, r+k) (k <= rows in flight; the
// remaining slots repeat the last row, r+k-1) and leaves row r+j's lanes in
// acc[j*8:j*8+8]. It reports false if the block must be recomputed on the
// portable path (a bf16 Inf or NaN weight on AVX-512).
func (m *Mat) rowsSIMD(lvl Level, r, k int, xd []float64, n8 int, acc *[64]float64) bool {
	c := m.Cols
	switch m.DType {
	case F32:
		if lvl == LevelAVX512 {
			var rows [8]*float32
			for j := range rows {
				rows[j] = &m.F32[(r+min(j, k-1))*c]
			}
			f32Rows8AVX512(&rows, &xd[0], n8, acc)
			return true
		}
		var rows [4]*float32
		for j := range rows {
			rows[j] = &m.F32[(r+min(j, k-1))*c]
		}
		f32Rows4AVX2(&rows, &xd[0], n8, (*[32]float64)(acc[:32]))
		return true
	case BF16:
		if lvl == LevelAVX512 {
			var rows [8]*uint16
			for j := range rows {
				rows[j] = &m.BF16[(r+min(j, k-1))*c]
			}
			return bf16Rows8AVX512(&rows, &xd[0], n8, acc)
		}
		var rows [4]*uint16
		for j := range rows {
			rows[j] = &m.BF16[(r+min(j, k-1))*c]
		}
		bf16Rows4AVX2(&rows, &xd[0], n8, (*[32]float64)(acc[:32]))
		return true
	default: // MXFP4, AVX-512 only
		a := newMxArgs()
		for j := 0; j < 8; j++ {
			row := r + min(j, k-1)
			a.packed[j] = &m.Packed[row*c/2]
			a.scales[j] = &m.Scales[row*c/MXGroup]
		}
		// the next block of rows follows this one in memory
		a.pf, a.pfs = a.packed[0], a.scales[0]
		if r+16 <= m.Rows {
			a.pf = &m.Packed[(r+8)*c/2]
			a.pfs = &m.Scales[(r+8)*c/MXGroup]
		}
		mxfp4Rows8AVX512(&a, &xd[0], c, acc)
		return true
	}
}

// matMulSIMD is the AVX-512 mat-mat path (T > rowKernelMaxT).
func matMulSIMD(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	gemmRun(p, m.Rows, m.Cols&^7, m.Cols, x, T, (T+3)&^3, func(sc *gemmScratch, xd []float64, xs, r0, r1 int) {
		m.gemmPanel(sc, dst, x, xd, xs, T, (T+3)&^3, r0, r1)
	})
}

func (m *Mat) gemmPanel(sc *gemmScratch, dst, x []float32, xd []float64, xs, T, Tp, r0, r1 int) {
	n := m.Cols
	n8 := n &^ 7
	tiles := (r1 - r0 + 5) / 6
	acc := sc.zeroAcc(tiles * 6 * Tp * Lanes)
	ma := newMxArgs()
	var ga gemmArgs
	ga.accStride = Tp * Lanes * 8
	for kb := 0; kb < n8; kb += kBlock {
		kl := min(kBlock, n8-kb)
		for tile := 0; tile < tiles; tile++ {
			for j := 0; j < 6; j++ {
				out := sc.w[j*wStride : j*wStride+kl]
				ga.w[j] = &out[0]
				row := r0 + tile*6 + j
				if row >= r1 {
					clear(out)
					continue
				}
				switch m.DType {
				case F32:
					decodeF32AVX512(&m.F32[row*n+kb], &out[0], kl)
				case BF16:
					decodeBF16AVX512(&m.BF16[row*n+kb], &out[0], kl)
				default:
					ma.packed[0] = &m.Packed[(row*n+kb)/2]
					ma.scales[0] = &m.Scales[(row*n+kb)/MXGroup]
					decodeMXFP4AVX512(&ma, &out[0], kl)
				}
			}
			for tg := 0; tg < Tp; tg += 4 {
				for t := 0; t < 4; t++ {
					ga.x[t] = &xd[(tg+t)*xs+kb]
				}
				ga.acc = &acc[(tile*6*Tp+tg)*Lanes]
				gemm6x4AVX512(&ga, kl)
			}
		}
	}
	m.finishPanel(dst, acc, x, T, Tp, r0, r1)
}

// simdDotF32 accumulates the first n&^7 products of w·x into the lanes a and
// returns how many elements it consumed (0: none, use the portable loop).
func simdDotF32(w, x []float32, a *[Lanes]float64) int {
	n8 := len(x) &^ 7
	if n8 < 32 {
		return 0
	}
	switch CurrentLevel() {
	case LevelAVX512:
		dotF32AVX512(&w[0], &x[0], n8, a)
	case LevelAVX2:
		dotF32AVX2(&w[0], &x[0], n8, a)
	default:
		return 0
	}
	return n8
}

// simdTVec computes the leading columns of MatTVec in blocks the kernels
// handle and returns how many columns it did.
func simdTVec(dst []float32, m *Mat, row0, col0 int, x []float32) int {
	lvl := CurrentLevel()
	block := 64
	if lvl == LevelAVX2 {
		block = 32
	} else if lvl != LevelAVX512 {
		return 0
	}
	nb := len(dst) / block * block
	if nb == 0 || len(x) == 0 {
		return 0
	}
	xb := getF64(len(x))
	xd := *xb
	for i, v := range x {
		xd[i] = float64(v)
	}
	var out [64]float64
	esize := 4
	if m.DType == BF16 {
		esize = 2
	}
	stride := m.Cols * esize
	for j := 0; j < nb; j += block {
		base := (row0*m.Cols + col0 + j)
		var w unsafe.Pointer
		if m.DType == BF16 {
			_ = m.BF16[base+(len(x)-1)*m.Cols+block-1]
			w = unsafe.Pointer(&m.BF16[base])
		} else {
			_ = m.F32[base+(len(x)-1)*m.Cols+block-1]
			w = unsafe.Pointer(&m.F32[base])
		}
		if lvl == LevelAVX512 {
			tvecAVX512(w, stride, m.DType == BF16, &xd[0], len(x), &out)
		} else {
			tvecAVX2(w, stride, m.DType == BF16, &xd[0], len(x), (*[32]float64)(out[:32]))
		}
		for c := 0; c < block; c++ {
			dst[j+c] = float32(out[c])
		}
	}
	putF64(xb)
	return nb
}

// simdMix computes the leading elements of AttnRes's weighted sum and
// returns how many it did.
func simdMix(dst []float32, sources [][]float32, s []float64) int {
	lvl := CurrentLevel()
	n8 := len(dst) &^ 7
	if lvl == LevelPortable || n8 == 0 || len(sources) > 64 {
		return 0
	}
	var ptrs [64]*float32
	for j, v := range sources {
		_ = v[n8-1]
		ptrs[j] = &v[0]
	}
	if lvl == LevelAVX512 {
		mixAVX512(&dst[0], &ptrs[0], &s[0], len(sources), n8)
	} else {
		mixAVX2(&dst[0], &ptrs[0], &s[0], len(sources), n8)
	}
	return n8
}

// readBlock reads every byte of b (len a multiple of 512) as fast as the
// machine can.
func readBlock(b []byte) uint64 {
	if CurrentLevel() == LevelAVX512 {
		return readAVX512(&b[0], len(b))
	}
	return readGo(b)
}

// simdMatVec64 is MatVec64 on the row kernels (8 rows in flight, 4 on
// AVX2); false means "use the portable path".
func simdMatVec64(dst []float64, m *Mat, x []float32) bool {
	lvl := CurrentLevel()
	n8 := m.Cols &^ 7
	if lvl == LevelPortable || n8 == 0 {
		return false
	}
	inflight := 8
	if lvl == LevelAVX2 {
		inflight = 4
	}
	xb := getF64(n8)
	xd := *xb
	for i, v := range x[:n8] {
		xd[i] = float64(v)
	}
	var acc [64]float64
	for r := 0; r < m.Rows; r += inflight {
		k := min(inflight, m.Rows-r)
		m.rowsSIMD(lvl, r, k, xd, n8, &acc) // f32 rows: always true
		for j := 0; j < k; j++ {
			dst[r+j] = m.finishRow64((*[Lanes]float64)(acc[j*Lanes:]), r+j, n8, x)
		}
	}
	putF64(xb)
	return true
}

// simdWeightedRows computes the leading outputs of WeightedRows (64 at a
// time with eight accumulators, then 8; AVX2 32, then 4) and returns how
// many it did.
func simdWeightedRows(dst []float32, p []float64, rows []float32, stride int) int {
	var m int
	switch CurrentLevel() {
	case LevelAVX512:
		m = len(dst) &^ 7
	case LevelAVX2:
		m = len(dst) &^ 3
	default:
		return 0
	}
	if m == 0 {
		return 0
	}
	if CurrentLevel() == LevelAVX512 {
		wrowsAVX512(&dst[0], &p[0], &rows[0], stride, len(p), m)
	} else {
		wrowsAVX2(&dst[0], &p[0], &rows[0], stride, len(p), m)
	}
	return m
}
