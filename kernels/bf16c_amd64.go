package kernels

import (
	"encoding/binary"
	"unsafe"
)

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

// bf16cGroupArgs is the argument block of decodeBF16CGroupAVX2; the
// assembly relies on the offsets noted (the constants as in bf16cArgs).
type bf16cGroupArgs struct {
	nib   [32]byte       // 0
	shift [8]uint32      // 32
	m7    [32]byte       // 64
	hdr   [bkGroup]*byte // 96: row r's header of the first block to do
	body  [bkGroup]*byte // 192: row r's body at that block
	pf    [bkGroup]*byte // 288: prefetched while row r is decoded, a line per block
	pfh   [bkGroup]*byte // 384: a line prefetched with row r (the next row's headers)
	dst   *float64       // 480: decoded row 0; rows bkWS float64s apart
	nb    int            // 488: full blocks per row (>= 1)
	rows  int            // 496: 1..bkGroup
	used  [bkGroup]int   // 504: out: body bytes row r's blocks took (48 compressed, 64 raw)
}

func newBF16CGroupArgs() bf16cGroupArgs {
	c := newBF16CArgs()
	return bf16cGroupArgs{nib: c.nib, shift: c.shift, m7: c.m7}
}

// decodeBF16CGroupAVX2 decodes a.nb full blocks of each of a.rows rows
// exactly for the tile kernels and stores in a.used[r] the body bytes row r
// took (48 per compressed block, 64 per raw one; a count, not an advanced
// pointer, which could point just past Z):
//
//	for r := 0; r < a.rows; r++ {
//		for i := 0; i < 32*a.nb; i++ {
//			dst[r*bkWS+i] = float64(BF16ToF32(blk(r, i/32)[i%32]))
//		}
//	}
//
// with blk(r, b) decoded from a.hdr[r][b] and the body a.body[r] points at.
// A prefetch never faults: a.pf and a.pfh only need to be addresses.
//
//go:noescape
func decodeBF16CGroupAVX2(a *bf16cGroupArgs)

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

// bf16cMatMul runs T > rowKernelMaxT tokens on the small-batch tiles of
// batch_amd64.go: panels of bkPanel rows in column blocks of bkCols, each
// group of bkGroup rows decoded once per block to float64 (exactly, so the
// activations are widened unscaled) and multiplied with every token, 1 to 4
// at a time, by the tile kernels. Each lane sums its elements in ascending
// column order across the blocks, as the contract asks; the short raw last
// block is added by bf16cFinish.
func bf16cMatMul(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	c := m.Cols
	n32 := c / BF16CBlock * BF16CBlock
	xs := n32 + 8 // float64s between tokens (breaks 4 KiB aliasing)
	xb := getF64(T * xs)
	xd := *xb
	for t := 0; t < T; t++ {
		row := xd[t*xs : t*xs+n32]
		for i, v := range x[t*c : t*c+n32] {
			row[i] = float64(v)
		}
	}
	groups := tokenGroups(T)
	p.Rows(m.Rows, bkPanel, func(r0, r1 int) {
		sc := bkPool.Get().(*bkScratch)
		for r := r0; r < r1; r += bkPanel {
			m.bf16cTilePanel(sc, dst, x, xd, xs, T, groups, r, min(r+bkPanel, r1))
		}
		bkPool.Put(sc)
	})
	putF64(xb)
}

// bf16cTilePanel computes output rows [r0, r1) (at most bkPanel) for all T
// tokens.
func (m *Mat) bf16cTilePanel(sc *bkScratch, dst, x []float32, xd []float64, xs, T int, groups []int, r0, r1 int) {
	c := m.Cols
	n32 := c / BF16CBlock * BF16CBlock
	nbh := uint64((c + BF16CBlock - 1) / BF16CBlock)
	ng := (r1 - r0 + bkGroup - 1) / bkGroup
	na := ng * bkGroup * T * Lanes
	if cap(sc.acc) < na {
		sc.acc = make([]float64, na)
	}
	acc := sc.acc[:na]
	clear(acc)
	// row r0+i's headers start at hdr[i] in Z, its next block's body at pos[i]
	var hdr, pos [bkPanel]uint64
	for i := 0; i < r1-r0; i++ {
		hdr[i] = m.ZOff[r0+i] - m.ZOff[0]
		pos[i] = hdr[i] + nbh
	}
	// at returns a prefetch address (the last byte for a position at the end)
	last := uint64(len(m.Z) - 1)
	at := func(o uint64) *byte { return &m.Z[min(o, last)] }
	a := newBF16CGroupArgs()
	a.dst = &sc.w[0]
	ta := tileArgs{w: unsafe.Pointer(&sc.w[0]), xstride: xs * 8, accRow: T * Lanes * 8}
	for kb := 0; kb < n32; kb += bkCols {
		kl := min(bkCols, n32-kb)
		a.nb = kl / BF16CBlock
		ta.n = kl / 8
		b0 := uint64(kb / BF16CBlock)
		for g := 0; g < ng; g++ {
			gr := g * bkGroup
			k := min(bkGroup, r1-r0-gr)
			// prefetch the rows decoded next: the next group's at this
			// block, or the first group's at the next one
			nr, nb0 := gr+bkGroup, b0
			if g == ng-1 {
				nr, nb0 = 0, b0+bkCols/BF16CBlock
			}
			for j := 0; j < k; j++ {
				i := gr + j
				a.hdr[j], a.body[j] = &m.Z[hdr[i]+b0], &m.Z[pos[i]]
				a.pf[j], a.pfh[j] = a.body[j], a.hdr[j]
				if p := nr + j; p < r1-r0 {
					a.pf[j], a.pfh[j] = at(pos[p]), at(hdr[p]+min(nb0, nbh-1))
				}
			}
			a.rows = k
			decodeBF16CGroupAVX2(&a)
			for j := 0; j < k; j++ {
				pos[gr+j] += uint64(a.used[j])
			}
			// the buffer rows past k keep what they held: the tiles add
			// them into lanes of rows past r1, which are never read
			m.groupTiles(&ta, xd, acc, xs, T, groups, g, kb)
		}
	}
	ldd := m.Rows
	for i := 0; i < r1-r0; i++ {
		z := m.bf16cRow(r0 + i)
		for t := 0; t < T; t++ {
			l := (*[Lanes]float64)(acc[(i*T+t)*Lanes:])
			dst[t*ldd+r0+i] = bf16cFinish(l, z, n32, x[t*c:(t+1)*c])
		}
	}
}
