package kernels

import "encoding/binary"

// BF16C on amd64: AVX2 + FMA kernels (bf16c_avx2_amd64.s) that read the
// compressed rows directly, used at LevelAVX2 and LevelAVX512 alike (every
// AVX-512 CPU has AVX2 and FMA; the AVX-512 forms are not written yet).
// Each kernel runs over a row's full 32-weight blocks; the short last block
// (cols%32 weights, always raw) is added by bf16cFinish, which also combines
// the lanes. The decode is exact for every bf16 value (Inf, NaN and
// subnormals included), so no block needs the portable path.

// bf16cArgs is the argument block of the BF16C kernels; the assembly relies
// on the offsets noted.
type bf16cArgs struct {
	nib   [32]byte    // 0: 0x0f
	shift [8]uint32   // 32: VPSRLVD counts 0,0,0,0,4,4,4,4 (high offset nibbles)
	m7    [32]byte    // 64: 0x7f
	rows  [4]*byte    // 96: row r's first header (of the first block to do)
	body  [4]*byte    // 128: row r's body at that block
	x     [4]*float64 // 160: token t's widened activations at that block's column
	nb    int         // 192: full blocks to do
	acc   *float64    // 200: lanes out
}

func newBF16CArgs() bf16cArgs {
	var a bf16cArgs
	for i := range a.nib {
		a.nib[i], a.m7[i] = 0x0f, 0x7f
	}
	for i := 4; i < 8; i++ {
		a.shift[i] = 4
	}
	return a
}

// In the loops below, blk(r, b) is block b of row r as bf16 words: decoded
// from a.rows[r][b] and the body that a.body[r] points at (as
// decodeBF16CRow does), and x[t][i] is the i-th float64 from a.x[t]; the
// caller guarantees nb full blocks behind every pointer. The lanes are
// written, not read.

// bf16cRows4x1AVX2 is the 4-row, 1-token row kernel:
//
//	for r := 0; r < 4; r++ {
//		lanes := acc[r*8 : r*8+8] // all set to 0 first
//		for i := 0; i < 32*a.nb; i++ {
//			lanes[i%8] += float64(BF16ToF32(blk(r, i/32)[i%32])) * x[0][i]
//		}
//	}
//
//go:noescape
func bf16cRows4x1AVX2(a *bf16cArgs)

// bf16cRows2x2AVX2 is the same loop for rows r < 2 and tokens t < 2, row r
// and token t's lanes at acc[(2*r+t)*8:], each decoded block used for both
// tokens.
//
//go:noescape
func bf16cRows2x2AVX2(a *bf16cArgs)

// bf16cRows1x4AVX2 is the same loop for row 0 and tokens t < 4, token t's
// lanes at acc[t*8:], each decoded block used for all four tokens.
//
//go:noescape
func bf16cRows1x4AVX2(a *bf16cArgs)

// decodeBF16CAVX2 decodes a.nb full blocks of row 0 exactly for the gemm
// micro-kernel and returns the body bytes it consumed (48 per compressed
// block, 64 per raw one):
//
//	for i := 0; i < 32*a.nb; i++ {
//		dst[i] = float64(BF16ToF32(blk(0, i/32)[i%32]))
//	}
//
//go:noescape
func decodeBF16CAVX2(a *bf16cArgs, dst *float64) (used int)

// simdMatMulBF16C is MatMul of a BF16C matrix on the SIMD path; false means
// "use the portable path".
func simdMatMulBF16C(p *Pool, dst []float32, m *Mat, x []float32, T int) bool {
	if lvl := CurrentLevel(); lvl != LevelAVX2 && lvl != LevelAVX512 {
		return false
	}
	if m.Cols < BF16CBlock || m.Rows == 0 || T <= 0 {
		return false
	}
	if T <= rowKernelMaxT {
		bf16cMatVec(p, dst, m, x, T)
	} else {
		bf16cMatMul(p, dst, m, x, T)
	}
	return true
}

// setRow points slot j of a at row r's first block.
func (a *bf16cArgs) setRow(j int, m *Mat, r, nbh int) {
	o := m.ZOff[r] - m.ZOff[0]
	a.rows[j] = &m.Z[o]
	a.body[j] = &m.Z[o+uint64(nbh)]
}

// bf16cFinish adds the columns [n32, len(x)) (the short raw last block,
// which ends the row z) into the lanes and combines them, as DotBF16C.
func bf16cFinish(l *[Lanes]float64, z []byte, n32 int, x []float32) float32 {
	if c := len(x); n32 < c {
		tail := z[len(z)-2*(c-n32):]
		for i := n32; i < c; i++ {
			w := binary.LittleEndian.Uint16(tail[2*(i-n32):])
			l[i&7] += float64(BF16ToF32(w)) * float64(x[i])
		}
	}
	return float32(combine(l))
}

// bf16cMatVec runs T <= 8 tokens on the row kernels. The rows go in blocks
// of 4; each block is multiplied with four tokens at a time by the 1x4
// kernel (one decode per row and four tokens; the block stays in L1/L2 for
// the next four), and the one, two or three tokens left over by the 4x1,
// 2x2 or (padded) 1x4 kernel.
func bf16cMatVec(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	c := m.Cols
	nfull := c / BF16CBlock
	n32 := nfull * BF16CBlock
	nbh := (c + BF16CBlock - 1) / BF16CBlock
	xb := getF64(T * n32)
	xd := *xb
	for t := 0; t < T; t++ {
		xt := xd[t*n32 : (t+1)*n32]
		for i, v := range x[t*c : t*c+n32] {
			xt[i] = float64(v)
		}
	}
	ldd := m.Rows
	p.Rows(m.Rows, max(4, rowChunk(m, p.Threads())/4*4), func(r0, r1 int) {
		a := newBF16CArgs()
		a.nb = nfull
		var acc [32]float64
		a.acc = &acc[0]
		// out stores the lanes of row r, token t, at acc[slot*8:]
		out := func(slot, r, t int) {
			dst[t*ldd+r] = bf16cFinish((*[Lanes]float64)(acc[slot*Lanes:]), m.bf16cRow(r), n32, x[t*c:(t+1)*c])
		}
		for r := r0; r < r1; r += 4 {
			k := min(4, r1-r)
			t0 := 0
			for ; t0+3 <= T; t0 += 4 { // four tokens, or three and a repeat
				for j := 0; j < k; j++ {
					a.setRow(0, m, r+j, nbh)
					for t := range 4 {
						a.x[t] = &xd[min(t0+t, T-1)*n32]
					}
					bf16cRows1x4AVX2(&a)
					for t := t0; t < min(t0+4, T); t++ {
						out(t-t0, r+j, t)
					}
				}
			}
			switch T - t0 {
			case 1:
				for j := range 4 {
					a.setRow(j, m, r+min(j, k-1), nbh)
				}
				a.x[0] = &xd[t0*n32]
				bf16cRows4x1AVX2(&a)
				for j := 0; j < k; j++ {
					out(j, r+j, t0)
				}
			case 2:
				a.x[0], a.x[1] = &xd[t0*n32], &xd[(t0+1)*n32]
				for j := 0; j < k; j += 2 {
					a.setRow(0, m, r+j, nbh)
					a.setRow(1, m, r+min(j+1, k-1), nbh)
					bf16cRows2x2AVX2(&a)
					for jj := j; jj < min(j+2, k); jj++ {
						for t := range 2 {
							out(2*(jj-j)+t, r+jj, t0+t)
						}
					}
				}
			}
		}
	})
	putF64(xb)
}

// bf16cMatMul runs T > 8 tokens on the mat-mat path: panels of panelRows
// rows in column blocks of kBlock, each 6-row block decoded once to float64
// and multiplied with every token by the gemm micro-kernel.
func bf16cMatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	n32 := m.Cols / BF16CBlock * BF16CBlock
	gemmRun(p, m.Rows, n32, m.Cols, x, T, (T+1)&^1, func(sc *gemmScratch, xd []float64, xs, r0, r1 int) {
		m.bf16cPanel(sc, dst, x, xd, xs, T, (T+1)&^1, r0, r1)
	})
}

func (m *Mat) bf16cPanel(sc *gemmScratch, dst, x []float32, xd []float64, xs, T, Tp, r0, r1 int) {
	c := m.Cols
	n32 := c / BF16CBlock * BF16CBlock
	nbh := uint64((c + BF16CBlock - 1) / BF16CBlock)
	tiles := (r1 - r0 + 5) / 6
	na := tiles * 6 * Tp * Lanes
	if cap(sc.acc) < na {
		sc.acc = make([]float64, na)
	}
	acc := sc.acc[:na]
	clear(acc)
	// pos[i] is where row r0+i's next block starts in Z
	var pos [panelRows]uint64
	for i := 0; i < r1-r0; i++ {
		pos[i] = m.ZOff[r0+i] - m.ZOff[0] + nbh
	}
	a := newBF16CArgs()
	var ga gemmArgs
	ga.accStride = Tp * Lanes * 8
	for kb := 0; kb < n32; kb += kBlock {
		kl := min(kBlock, n32-kb)
		a.nb = kl / BF16CBlock
		for tile := 0; tile < tiles; tile++ {
			for j := 0; j < 6; j++ {
				out := sc.w[j*wStride : j*wStride+kl]
				ga.w[j] = &out[0]
				i := tile*6 + j
				if r0+i >= r1 {
					clear(out)
					continue
				}
				a.rows[0] = &m.Z[m.ZOff[r0+i]-m.ZOff[0]+uint64(kb/BF16CBlock)]
				a.body[0] = &m.Z[pos[i]]
				pos[i] += uint64(decodeBF16CAVX2(&a, &out[0]))
			}
			for half := 0; half < 2; half++ {
				var ga2 gemmArgs
				ga2.accStride = ga.accStride
				copy(ga2.w[:3], ga.w[half*3:half*3+3])
				for tg := 0; tg < Tp; tg += 2 {
					ga2.x[0] = &xd[tg*xs+kb]
					ga2.x[1] = &xd[(tg+1)*xs+kb]
					ga2.acc = &acc[((tile*6+half*3)*Tp+tg)*Lanes]
					gemm3x2AVX2(&ga2, kl)
				}
			}
		}
	}
	ldd := m.Rows
	for i := 0; i < r1-r0; i++ {
		z := m.bf16cRow(r0 + i)
		for t := 0; t < T; t++ {
			l := (*[Lanes]float64)(acc[(i*Tp+t)*Lanes:])
			dst[t*ldd+r0+i] = bf16cFinish(l, z, n32, x[t*c:(t+1)*c])
		}
	}
}

// gemm3x2AVX2 is the mat-mat micro-kernel of the BF16C T > 8 path: for
// weight rows w[0..2] (decoded to float64) and tokens x[0..1] of a,
//
//	for r := 0; r < 3; r++ {
//		for t := 0; t < 2; t++ {
//			lanes := a.acc[r*a.accStride/8+t*8:][:8]
//			for i := 0; i < k; i++ {
//				lanes[i%8] += a.w[r][i] * a.x[t][i]
//			}
//		}
//	}
//
// k is a multiple of 8; bf16cPanel runs each 6-row tile as two halves.
//
//go:noescape
func gemm3x2AVX2(a *gemmArgs, k int)
