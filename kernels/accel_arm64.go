package kernels

import (
	"unsafe"
)

// The NEON driver: the blocking of the amd64 AVX-512 path (row kernels for
// T <= rowKernelMaxT, decode and a 3x2 register tile above), with the row
// counts the 32 NEON registers hold: 4 f32 or bf16 rows, 2 MXFP4 rows.

// simdMatMul is MatMul on the NEON path; false means "use the portable path".
func simdMatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) bool {
	if CurrentLevel() != LevelNEON {
		return false
	}
	if m.DType == BF16C {
		return simdMatMulBF16C(p, dst, m, x, T)
	}
	n8 := m.Cols &^ 7
	if n8 == 0 || m.Rows == 0 || T <= 0 {
		return false
	}
	if m.DType == MXFP4 && !allFinite(x[:T*m.Cols]) {
		// NaN-scale groups give zero products here, which only equals
		// skipping them for finite activations
		return false
	}
	if T <= rowKernelMaxT {
		matVecNEON(p, dst, m, x, T)
	} else {
		matMulNEON(p, dst, m, x, T)
	}
	return true
}

// inflightNEON is the number of rows a row kernel takes at once.
func inflightNEON(d DType) int {
	if d == MXFP4 {
		return 2
	}
	return 4
}

// widen returns float64(x[t*n+i]) for i < n8 of each token t at [t*n8+i].
func widen(x []float32, n, n8, T int) *[]float64 {
	xb := getF64(T * n8)
	xd := *xb
	for t := 0; t < T; t++ {
		xt := xd[t*n8 : (t+1)*n8]
		for i, v := range x[t*n : t*n+n8] {
			xt[i] = float64(v)
		}
	}
	return xb
}

// matVecNEON streams the rows through the row kernels; with T > 1 each
// block of rows is multiplied with every token while it is in cache.
func matVecNEON(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	n := m.Cols
	n8 := n &^ 7
	xb := widen(x, n, n8, T)
	xd := *xb
	inflight := inflightNEON(m.DType)
	chunk := rowChunk(m, p.Threads())
	chunk = max(inflight, chunk/inflight*inflight)
	ldd := m.Rows
	p.Rows(m.Rows, chunk, func(r0, r1 int) {
		var acc [32]float64
		for r := r0; r < r1; r += inflight {
			k := min(inflight, r1-r)
			for t := 0; t < T; t++ {
				xt := x[t*n : (t+1)*n]
				out := dst[t*ldd : (t+1)*ldd]
				m.rowsNEON(r, k, xd[t*n8:(t+1)*n8], n8, &acc)
				for j := 0; j < k; j++ {
					out[r+j] = m.finishRow((*[Lanes]float64)(acc[j*Lanes:]), r+j, n8, xt)
				}
			}
		}
	})
	putF64(xb)
}

// rowsNEON runs one row kernel on rows [r, r+k) (k <= inflightNEON; the
// remaining slots repeat the last row) and leaves row r+j's lanes in
// acc[j*8:j*8+8].
func (m *Mat) rowsNEON(r, k int, xd []float64, n8 int, acc *[32]float64) {
	c := m.Cols
	switch m.DType {
	case F32:
		var rows [4]*float32
		for j := range rows {
			rows[j] = &m.F32[(r+min(j, k-1))*c]
		}
		f32Rows4NEON(&rows, &xd[0], n8, acc)
	case BF16:
		var rows [4]*uint16
		for j := range rows {
			rows[j] = &m.BF16[(r+min(j, k-1))*c]
		}
		bf16Rows4NEON(&rows, &xd[0], n8, acc)
	default:
		r1 := r + min(1, k-1)
		mxfp4Rows2NEON(&m.Packed[r*c/2], &m.Packed[r1*c/2], &m.Scales[r*c/MXGroup], &m.Scales[r1*c/MXGroup],
			&mxTopTab, &xd[0], c, (*[16]float64)(acc[:16]))
	}
}

func matMulNEON(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	gemmRun(p, m.Rows, m.Cols&^7, m.Cols, x, T, (T+1)&^1, func(sc *gemmScratch, xd []float64, xs, r0, r1 int) {
		m.gemmPanelNEON(sc, dst, x, xd, xs, T, (T+1)&^1, r0, r1)
	})
}

func (m *Mat) gemmPanelNEON(sc *gemmScratch, dst, x []float32, xd []float64, xs, T, Tp, r0, r1 int) {
	n := m.Cols
	n8 := n &^ 7
	tiles := (r1 - r0 + 5) / 6
	acc := sc.zeroAcc(tiles * 6 * Tp * Lanes)
	var ga gemmArgs
	ga.accStride = Tp * Lanes * 8
	for kb := 0; kb < n8; kb += kBlock {
		kl := min(kBlock, n8-kb)
		for tile := 0; tile < tiles; tile++ {
			var w [6]*float64
			for j := 0; j < 6; j++ {
				out := sc.w[j*wStride : j*wStride+kl]
				w[j] = &out[0]
				row := r0 + tile*6 + j
				if row >= r1 {
					clear(out)
					continue
				}
				switch m.DType {
				case F32:
					decodeF32NEON(&m.F32[row*n+kb], &out[0], kl)
				case BF16:
					decodeBF16NEON(&m.BF16[row*n+kb], &out[0], kl)
				default:
					decodeMXFP4NEON(&m.Packed[(row*n+kb)/2], &m.Scales[(row*n+kb)/MXGroup], &mxTopTab, &out[0], kl)
				}
			}
			for half := 0; half < 2; half++ {
				copy(ga.w[:3], w[half*3:half*3+3])
				for tg := 0; tg < Tp; tg += 2 {
					ga.x[0] = &xd[tg*xs+kb]
					ga.x[1] = &xd[(tg+1)*xs+kb]
					ga.acc = &acc[((tile*6+half*3)*Tp+tg)*Lanes]
					gemm3x2NEON(&ga, kl)
				}
			}
		}
	}
	m.finishPanel(dst, acc, x, T, Tp, r0, r1)
}

// simdDotF32 accumulates the first n&^7 products of w·x into the lanes a and
// returns how many elements it consumed (0: none, use the portable loop).
func simdDotF32(w, x []float32, a *[Lanes]float64) int {
	n8 := len(x) &^ 7
	if n8 < 32 || CurrentLevel() != LevelNEON {
		return 0
	}
	dotF32NEON(&w[0], &x[0], n8, a)
	return n8
}

// simdTVec computes the leading columns of MatTVec in blocks of 32 and
// returns how many columns it did.
func simdTVec(dst []float32, m *Mat, row0, col0 int, x []float32) int {
	const block = 32
	nb := len(dst) / block * block
	if CurrentLevel() != LevelNEON || nb == 0 || len(x) == 0 {
		return 0
	}
	xb := getF64(len(x))
	xd := *xb
	for i, v := range x {
		xd[i] = float64(v)
	}
	var out [block]float64
	esize := 4
	if m.DType == BF16 {
		esize = 2
	}
	stride := m.Cols * esize
	for j := 0; j < nb; j += block {
		base := row0*m.Cols + col0 + j
		var w unsafe.Pointer
		if m.DType == BF16 {
			_ = m.BF16[base+(len(x)-1)*m.Cols+block-1]
			w = unsafe.Pointer(&m.BF16[base])
		} else {
			_ = m.F32[base+(len(x)-1)*m.Cols+block-1]
			w = unsafe.Pointer(&m.F32[base])
		}
		tvecNEON(w, stride, m.DType == BF16, &xd[0], len(x), &out)
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
	n8 := len(dst) &^ 7
	if CurrentLevel() != LevelNEON || n8 == 0 || len(sources) > 64 {
		return 0
	}
	var ptrs [64]*float32
	for j, v := range sources {
		_ = v[n8-1]
		ptrs[j] = &v[0]
	}
	mixNEON(&dst[0], &ptrs[0], &s[0], len(sources), n8)
	return n8
}

// readBlock reads every byte of b (len a multiple of 512).
func readBlock(b []byte) uint64 { return readGo(b) }

// simdMatVec64 is MatVec64 on the f32 row kernel (4 rows in flight); false
// means "use the portable path".
func simdMatVec64(dst []float64, m *Mat, x []float32) bool {
	n8 := m.Cols &^ 7
	if CurrentLevel() != LevelNEON || n8 == 0 {
		return false
	}
	xb := getF64(n8)
	xd := *xb
	for i, v := range x[:n8] {
		xd[i] = float64(v)
	}
	var acc [32]float64
	for r := 0; r < m.Rows; r += 4 {
		k := min(4, m.Rows-r)
		m.rowsNEON(r, k, xd, n8, &acc)
		for j := 0; j < k; j++ {
			dst[r+j] = m.finishRow64((*[Lanes]float64)(acc[j*Lanes:]), r+j, n8, x)
		}
	}
	putF64(xb)
	return true
}

// simdWeightedRows computes the leading outputs of WeightedRows (16 at a
// time, then 8) and returns how many it did.
func simdWeightedRows(dst []float32, p []float64, rows []float32, stride int) int {
	m := len(dst) &^ 7
	if CurrentLevel() != LevelNEON || m == 0 {
		return 0
	}
	wrowsNEON(&dst[0], &p[0], &rows[0], stride, len(p), m)
	return m
}
