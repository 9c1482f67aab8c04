package kernels

import "encoding/binary"

// The NEON BF16C driver. The kernels (bf16c_neon_arm64.s) walk the full
// 32-weight blocks of each row straight from the compressed bytes, rebuild
// each block's bf16 words in registers and widen them as bf16Rows4NEON
// does; Go adds the short last block (cols%32 weights, always raw, the last
// bytes of the row) and combines the lanes. Rows of fewer than 32 columns
// have no full block and run on the portable path.

// bf16cXBlock is the activation bytes (all tokens, widened) one call of the
// mat-mat kernel reads for each row it walks: the kernel reads them once per
// row, so they should stay in L1.
const bf16cXBlock = 16 << 10

// simdMatMulBF16C is MatMul of a BF16C matrix on the SIMD path; false means
// "use the portable path".
func simdMatMulBF16C(p *Pool, dst []float32, m *Mat, x []float32, T int) bool {
	if CurrentLevel() != LevelNEON || m.Rows == 0 || T <= 0 || m.Cols < BF16CBlock {
		return false
	}
	if T <= rowKernelMaxT {
		bf16cMatVecNEON(p, dst, m, x, T)
	} else {
		bf16cMatMulNEON(p, dst, m, x, T)
	}
	return true
}

// bf16cFinish adds the short last block of a row (its cols%32 weights are
// the row's last bytes) to the lanes and combines them, rounded to float32.
func bf16cFinish(l *[Lanes]float64, row []byte, c int, x []float32) float32 {
	if tail := c % BF16CBlock; tail != 0 {
		w := row[len(row)-2*tail:]
		xs := x[c-tail : c]
		for j, v := range xs {
			l[j&7] += float64(BF16ToF32(binary.LittleEndian.Uint16(w[2*j:]))) * float64(v)
		}
	}
	return float32(combine(l))
}

// bf16cMatVecNEON runs the row kernel over blocks of 4 rows; with T > 1
// each block of rows is multiplied with every token in turn while its bytes
// are in cache.
func bf16cMatVecNEON(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	n := m.Cols
	nb := (n + BF16CBlock - 1) / BF16CBlock
	full := n / BF16CBlock
	n32 := full * BF16CBlock
	xb := widen(x, n, n32, T)
	xd := *xb
	chunk := rowChunk(m, p.Threads())
	chunk = max(4, chunk/4*4)
	ldd := m.Rows
	p.Rows(m.Rows, chunk, func(r0, r1 int) {
		var acc [32]float64
		var rows [4]*byte
		for r := r0; r < r1; r += 4 {
			k := min(4, r1-r)
			for j := range rows {
				rows[j] = &m.Z[m.ZOff[r+min(j, k-1)]-m.ZOff[0]]
			}
			for t := 0; t < T; t++ {
				bf16cRows4NEON(&rows, nb, &xd[t*n32], full, &acc)
				xt := x[t*n : (t+1)*n]
				for j := 0; j < k; j++ {
					dst[t*ldd+r+j] = bf16cFinish((*[Lanes]float64)(acc[j*Lanes:]), m.bf16cRow(r+j), n, xt)
				}
			}
		}
	})
	putF64(xb)
}

// bf16cMatMulNEON: panels of panelRows rows; for each run of column blocks
// whose widened activations fill about bf16cXBlock, the kernel decodes each
// row's blocks once and multiplies them with every token, the lanes kept in
// memory between calls.
func bf16cMatMulNEON(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	n := m.Cols
	nb := (n + BF16CBlock - 1) / BF16CBlock
	full := n / BF16CBlock
	// activations as [block][token][32]float64: a call reads one run of them
	// in order, once per row
	xb := getF64(full * T * BF16CBlock)
	xd := *xb
	for k := 0; k < full; k++ {
		for t := 0; t < T; t++ {
			out := xd[(k*T+t)*BF16CBlock : (k*T+t+1)*BF16CBlock]
			for i, v := range x[t*n+k*BF16CBlock : t*n+(k+1)*BF16CBlock] {
				out[i] = float64(v)
			}
		}
	}
	run := max(1, bf16cXBlock/(T*BF16CBlock*8))
	ldd := m.Rows
	p.Rows(m.Rows, panelRows, func(r0, r1 int) {
		ab := getF64(panelRows * T * Lanes)
		for r := r0; r < r1; r += panelRows {
			nr := min(panelRows, r1-r)
			acc := (*ab)[:nr*T*Lanes]
			clear(acc)
			var hdr, body [panelRows]int
			for j := 0; j < nr; j++ {
				hdr[j] = int(m.ZOff[r+j] - m.ZOff[0])
				body[j] = hdr[j] + nb
			}
			a := bf16cGemmArgs{z: &m.Z[0], hdr: &hdr[0], body: &body[0], nr: nr, T: T, acc: &acc[0]}
			for k := 0; k < full; k += run {
				a.nblk = min(run, full-k)
				a.x = &xd[k*T*BF16CBlock]
				bf16cGemmNEON(&a)
			}
			for j := 0; j < nr; j++ {
				row := m.bf16cRow(r + j)
				for t := 0; t < T; t++ {
					l := (*[Lanes]float64)(acc[(j*T+t)*Lanes:])
					dst[t*ldd+r+j] = bf16cFinish(l, row, n, x[t*n:(t+1)*n])
				}
			}
		}
		putF64(ab)
	})
	putF64(xb)
}

// Assembly kernels (bf16c_neon_arm64.s). A block is the 32 weights of one
// header: a header h < 255 is followed in the body stream by 16 offset bytes
// and 32 sign/mantissa bytes, element j = sign<<15 | (h+off(j))<<7 | mant
// (bf16c.go); h == 255 by 32 little-endian bf16 words. The kernels rebuild
// the words in 16-byte registers (byte lanes: high byte sign | e>>1 by SRI,
// low byte e<<7 | mant by SLI, then ZIP) and widen them exactly as
// bf16Rows4NEON does, so every product and every lane equals DotBF16C's.
// Every header and body byte they read exists: BF16CFromBytes and
// CompressBF16 check or make each row's length from its headers.

// bf16cRows4NEON is the BF16C row kernel, 4 rows in flight (acc is written,
// not read). Row r's headers start at rows[r] and its bodies nb bytes later
// (nb is the row's header count); the kernel walks its first full blocks:
//
//	for r := 0; r < 4; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < 32*full; i++ {
//			acc[r*8+i%8] += float64(BF16ToF32(w(r, i))) * x[i]
//		}
//	}
//
// where w(r, i) is weight i of row r as decodeBF16CRow gives it and x[i] =
// float64(a[i]) of the float32 activations a.
//
//go:noescape
func bf16cRows4NEON(rows *[4]*byte, nb int, x *float64, full int, acc *[32]float64)

// bf16cGemmArgs is the argument block of bf16cGemmNEON; the assembly relies
// on the offsets noted.
type bf16cGemmArgs struct {
	z    *byte    // 0: the matrix's Z
	hdr  *int     // 8: hdr[j]: offset in z of row j's next header (advanced by nblk)
	body *int     // 16: body[j]: offset in z of row j's next body (advanced)
	nr   int      // 24: rows
	nblk int      // 32: blocks per row in this call
	x    *float64 // 40: activations, block k token t at x[(k*T+t)*32:][:32]
	T    int      // 48: tokens (>= 1)
	acc  *float64 // 56: lanes of row j, token t at acc[(j*T+t)*8:][:8] (read and written)
}

// bf16cGemmNEON is the mat-mat kernel: each block of each row is decoded
// once to 16 registers of float64 and multiplied with every token, the lanes
// loaded from and stored to a.acc around each token:
//
//	for j := 0; j < a.nr; j++ {
//		for k := 0; k < a.nblk; k++ {
//			w := the 32 weights of the block at hdr[j], body[j], widened
//			advance hdr[j] by 1 and body[j] by the block's body
//			for t := 0; t < a.T; t++ {
//				lanes := a.acc[(j*a.T+t)*8:][:8]
//				for i := 0; i < 32; i++ {
//					lanes[i%8] += w[i] * a.x[(k*a.T+t)*32+i]
//				}
//			}
//		}
//	}
//
// Called for the column runs of a row in ascending order, each lane sums
// its elements in ascending order, as the contract asks.
//
//go:noescape
func bf16cGemmNEON(a *bf16cGemmArgs)
