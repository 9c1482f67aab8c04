package kernels

import (
	"sync"
	"unsafe"
)

// The AVX2 small-batch path: every MatMul with T >= 2 tokens, and MXFP4 at
// T = 1 too. A panel of bkPanel output rows is computed in column blocks of
// bkCols; in each block every group of bkGroup rows is decoded once (into
// L1: bf16 and f32 to float64, MXFP4 to the 16-bit top words of its float64
// values) and multiplied with all the tokens, 1 to 4 at a time, by a
// register-tiled kernel (batch_avx2_amd64.s), so each weight is decoded
// once per call whatever T is. The lane accumulators of the panel live in
// memory between column blocks; a block adds to them in ascending column
// order, so every lane sums its elements in the contract's order.
const (
	bkGroup = 12          // rows decoded together: a multiple of every tile's rows
	bkCols  = 256         // columns per block (a multiple of MXGroup)
	bkWS    = bkCols + 8  // float64s between decoded rows (2112 bytes, fixed in the tile kernels)
	bkWW    = bkCols + 32 // uint16s between MXFP4 word rows (576 bytes, fixed in the MXFP4 tiles)
	bkPanel = 4 * bkGroup
	// fusedMaxT is the largest T at which bf16 skips the buffer: widening
	// the weights once per group of tokens in the tiles costs less than
	// decoding them into the buffer and reading them back up to T = 8
	// (docs/BENCHMARKS.md); tokenGroups makes no group of 1 there.
	fusedMaxT = 8
)

// tileArgs is the argument block of the tile kernels; the assembly relies on
// the offsets noted.
type tileArgs struct {
	w       unsafe.Pointer // 0: decoded row 0 of the group at the block's first column (float64s; *MX tiles: words)
	x       *float64       // 8: the first token's widened activations at the block's first column
	xstride int            // 16: bytes between tokens' activations
	acc     *float64       // 24: lanes of (row 0, first token); token t's lanes follow at 64*t bytes
	accRow  int            // 32: bytes between rows' lanes
	n       int            // 40: 8-column steps in the block (>= 1)
	ctrl    *[32]byte      // 48: *MX tiles: &mxWordCtrl
	dec     *decState      // 56: tile3x4MXAVX2: the decode to overlap
}

// decState is an MXFP4 decode that tile3x4MXAVX2 runs in pieces between
// its tiles (decPieceMXAVX2 on its own): rows of units (32 weights of a
// row) into words in the even/odd order of the MXFP4 tiles. Addresses are uintptrs into m.Packed, m.Scales and a word buffer,
// all kept alive by the caller; the assembly relies on the offsets noted.
type decState struct {
	_                     [3]uintptr // 0, 8, 16: the next unit's packed bytes, scale, words (the assembly's)
	u, rows               int        // 24: units left in the row; 32: rows left counting this one (0: done)
	rowSrc, rowSc, rowDst uintptr    // 40, 48, 56: the current row's first unit
	stride, sstride       int        // 64, 72: bytes between rows of packed and scales
	units, k              int        // 80: units per row; 88: units per piece
	tabs                  uintptr    // 96: &mxTopTab
	pf, pfs               uintptr    // 104, 112: the current row of the block to prefetch
}

// setDec points st at the decode of columns [kb, kb+kl) of rows [r, r+k)
// into w (rows bkWW apart; rows k.. cleared), prefetching the same columns
// from pk of rows from pr, in pieces of up to per units.
func (m *Mat) setDec(st *decState, w *[bkGroup * bkWW]uint16, r, k, kb, kl, pr, pk, per int) {
	n := m.Cols
	for j := k; j < bkGroup; j++ {
		clear(w[j*bkWW : j*bkWW+kl])
	}
	st.stride, st.sstride = n/2, n/MXGroup
	// start before row 0: the first unit moves to it (and prefetches)
	st.rowSrc = uintptr(unsafe.Pointer(&m.Packed[(r*n+kb)/2])) - uintptr(st.stride)
	st.rowSc = uintptr(unsafe.Pointer(&m.Scales[(r*n+kb)/MXGroup])) - uintptr(st.sstride)
	st.rowDst = uintptr(unsafe.Pointer(&w[0])) - 2*bkWW
	st.pf = uintptr(unsafe.Pointer(&m.Packed[(pr*n+pk)/2])) - uintptr(st.stride)
	st.pfs = uintptr(unsafe.Pointer(&m.Scales[(pr*n+pk)/MXGroup])) - uintptr(st.sstride)
	st.u, st.rows, st.units, st.k = 0, k+1, kl/MXGroup, per
	st.tabs = uintptr(unsafe.Pointer(&mxTopTab))
}

// dtileArgs is the argument block of the fused tile kernels (dtile*); the
// assembly relies on the offsets noted.
type dtileArgs struct {
	src     unsafe.Pointer // 0: bf16 words of the tile's row 0 at the block's first column
	stride  int            // 8: bytes between rows of src
	_       [3]int         // 16
	x       *float64       // 40: as tileArgs.x
	xstride int            // 48
	acc     *float64       // 56: as tileArgs.acc
	accRow  int            // 64
	n       int            // 72: 8-column steps in the block
}

// decArgs is the argument block of the decoders decodeRows*AVX2; the
// assembly relies on the offsets noted.
type decArgs struct {
	src    unsafe.Pointer // 0: row 0 of the block (bf16 words)
	stride int            // 8: bytes between rows of src
	_      [2]int         // 16
	pf     unsafe.Pointer // 32: row 0 of the next block to decode (prefetched; rows stride apart)
	_      uintptr        // 40
	dst    *float64       // 48: decoded row 0; rows bkWS float64s apart
	n      int            // 56: elements per row (a multiple of 8)
	rows   int            // 64: >= 1
	cA, cB [32]byte       // 72, 104: VPSHUFB controls: words 0-3, 4-7 of a 16-byte broadcast to bytes 6-7 of 4 qwords
	mask   [4]uint64      // 136: bf16: the bits of w*2^-896 in a qword
	exp    uint64         // 168: bf16: four 0x7f80 (the exponent bits)
}

func newDecArgs() decArgs {
	a := decArgs{mask: [4]uint64{0x8fffffff << 32, 0x8fffffff << 32, 0x8fffffff << 32, 0x8fffffff << 32}, exp: 0x7f807f807f807f80}
	for q := 0; q < 4; q++ {
		for b := 0; b < 8; b++ {
			a.cA[8*q+b], a.cB[8*q+b] = 0x80, 0x80
		}
		// qword q of a lane pair: word q (output A) or 4+q (output B)
		a.cA[8*q+6], a.cA[8*q+7] = byte(2*q), byte(2*q+1)
		a.cB[8*q+6], a.cB[8*q+7] = byte(8+2*q), byte(8+2*q+1)
	}
	return a
}

type bkScratch struct {
	w   [bkGroup * bkWS]float64
	ww  [2][bkGroup * bkWW]uint16 // MXFP4: the group the tiles read, the next one decoded meanwhile
	acc []float64
}

// mxWordCtrl is the VPSHUFB control of the MXFP4 tiles: of 4 words broadcast
// to both lanes, word q goes to bytes 6-7 of qword q, the rest is zero.
var mxWordCtrl = func() (c [32]byte) {
	for i := range c {
		c[i] = 0x80
	}
	for q := 0; q < 4; q++ {
		c[8*q+6], c[8*q+7] = byte(2*q), byte(2*q+1)
	}
	return c
}()

// mxEOPerm is the lane order of the MXFP4 tiles: position p of an 8-column
// step of the words, of the widened activations and of the lane
// accumulators holds lane mxEOPerm[p] (even lanes, then odd).
var mxEOPerm = [Lanes]int{0, 2, 4, 6, 1, 3, 5, 7}

var bkPool = sync.Pool{New: func() any { return new(bkScratch) }}

// tokenGroups splits T tokens into groups for the tile kernels: 4 at a time
// (a 3x4 tile), the rest as one group of 3, 2 or 1, except that a lone
// last token after a group of 4 goes as 3+2 rather than 4+1 (the 12x1 tile
// loads a weight per multiply-add).
func tokenGroups(T int) []int {
	var g []int
	for T > 0 {
		switch {
		case T == 5:
			return append(g, 3, 2)
		case T >= 4:
			g = append(g, 4)
			T -= 4
		default:
			return append(g, T)
		}
	}
	return g
}

// matMulAVX2 is MatMul on the AVX2 small-batch path.
func matMulAVX2(p *Pool, dst []float32, m *Mat, x []float32, T int) {
	n := m.Cols
	n8 := n &^ 7
	xs := n8 + 8 // float64s between tokens (breaks 4 KiB aliasing)
	xb := getF64(T * xs)
	xd := *xb
	scale := 1.0
	fused := m.DType == BF16 && T >= 2 && T <= fusedMaxT
	if m.DType == BF16 && !fused {
		scale = 0x1p896 // the bf16 decoders yield w*2^-896
	}
	eo := m.DType == MXFP4
	for t := 0; t < T; t++ {
		row := xd[t*xs : t*xs+n8]
		xt := x[t*n : t*n+n8]
		if eo {
			for j := 0; j < n8; j += Lanes {
				for p, l := range mxEOPerm {
					row[j+p] = float64(xt[j+l])
				}
			}
			continue
		}
		for i, v := range xt {
			row[i] = float64(v) * scale
		}
	}
	groups := tokenGroups(T)
	p.Rows(m.Rows, bkPanel, func(r0, r1 int) {
		// a pool without workers hands over all rows at once: keep the
		// panels (and their accumulators) at bkPanel rows all the same
		sc := bkPool.Get().(*bkScratch)
		for r := r0; r < r1; r += bkPanel {
			m.bkPanel(sc, dst, x, xd, xs, T, groups, r, min(r+bkPanel, r1), fused)
		}
		bkPool.Put(sc)
	})
	putF64(xb)
}

func (m *Mat) bkPanel(sc *bkScratch, dst, x []float32, xd []float64, xs, T int, groups []int, r0, r1 int, fused bool) {
	n := m.Cols
	n8 := n &^ 7
	ng := (r1 - r0 + bkGroup - 1) / bkGroup
	na := ng * bkGroup * T * Lanes
	if cap(sc.acc) < na {
		sc.acc = make([]float64, na)
	}
	acc := sc.acc[:na]
	clear(acc)
	if fused {
		// group by group along the rows (the kernels prefetch ahead in
		// each row); the last group, if short, goes through the buffer
		da := dtileArgs{stride: 2 * n, xstride: xs * 8, accRow: T * Lanes * 8}
		for g := 0; g < ng; g++ {
			gr := r0 + g*bkGroup
			if r1-gr < bkGroup {
				m.bkGroupBuffered(sc, xd, acc, xs, T, groups, g, gr, r1-gr, n8)
				continue
			}
			for kb := 0; kb < n8; kb += bkCols {
				m.fusedGroup(&da, xd, acc, xs, T, groups, gr, g, kb, min(bkCols, n8-kb))
			}
		}
	} else if m.DType == MXFP4 {
		m.mxPanel(sc, xd, acc, xs, T, groups, r0, r1)
	} else {
		a := tileArgs{w: unsafe.Pointer(&sc.w[0]), xstride: xs * 8, accRow: T * Lanes * 8}
		for kb := 0; kb < n8; kb += bkCols {
			kl := min(bkCols, n8-kb)
			a.n = kl / 8
			for g := 0; g < ng; g++ {
				gr := r0 + g*bkGroup
				k := min(bkGroup, r1-gr)
				// prefetch the next group's rows, or the first group's
				// next block
				pr, pk := gr+bkGroup, kb
				if g == ng-1 {
					pr, pk = r0, kb+bkCols
				}
				if pk >= n8 || pr+k > m.Rows {
					pr, pk = gr, kb
				}
				m.decodeGroup(&sc.w, gr, k, kb, kl, pr, pk)
				m.groupTiles(&a, xd, acc, xs, T, groups, g, kb)
			}
		}
	}
	ldd := m.Rows
	eo := m.DType == MXFP4
	for i := 0; i < r1-r0; i++ {
		for t := 0; t < T; t++ {
			l := (*[Lanes]float64)(acc[(i*T+t)*Lanes:])
			if eo {
				// MXFP4 rows have no tail (Cols % 32 == 0): the
				// contract's tree on the lanes in mxEOPerm order
				dst[t*ldd+r0+i] = float32(((l[0] + l[2]) + (l[1] + l[3])) + ((l[4] + l[6]) + (l[5] + l[7])))
				continue
			}
			dst[t*ldd+r0+i] = m.finishRow(l, r0+i, n8, x[t*n:(t+1)*n])
		}
	}
}

// tileSet is a tile kernel per token-group size (index 1, 2, 3, 4).
type tileSet [5]func(*tileArgs)

var (
	f64Tiles = tileSet{1: tile12x1AVX2, 2: tile6x2AVX2, 3: tile4x3AVX2, 4: tile3x4AVX2}
	mxTiles  = tileSet{1: tile12x1MXAVX2, 2: tile6x2MXAVX2, 3: tile4x3MXAVX2, 4: tile3x4MXAVX2}
)

// groupTiles multiplies the decoded group g (sc.w, one column block from
// kb) with every token, by the float64 tiles.
func (m *Mat) groupTiles(a *tileArgs, xd, acc []float64, xs, T int, groups []int, g, kb int) {
	runTiles(&f64Tiles, a, xd, acc, xs, T, groups, g, kb)
}

// runTiles runs tiles over group g's token groups.
func runTiles(tiles *tileSet, a *tileArgs, xd, acc []float64, xs, T int, groups []int, g, kb int) {
	t0 := 0
	for _, tg := range groups {
		a.x = &xd[t0*xs+kb]
		a.acc = &acc[(g*bkGroup*T+t0)*Lanes]
		tiles[tg](a)
		t0 += tg
	}
}

// mxPanel is bkPanel's loop over column blocks and groups for MXFP4, with
// each group's decode overlapped with the previous group's tiles: the 3x4
// tiles (tile3x4MXAVX2) decode the next group (or the first group of the
// next column block) into the other word buffer in pieces, and what is
// left of it (all of it without a group of 4 tokens) is decoded after them.
// Each decode prefetches the block of the group after it.
func (m *Mat) mxPanel(sc *bkScratch, xd, acc []float64, xs, T int, groups []int, r0, r1 int) {
	const cb = bkCols
	n8 := m.Cols
	ng := (r1 - r0 + bkGroup - 1) / bkGroup
	n4 := 0
	for _, tg := range groups {
		if tg == 4 {
			n4++
		}
	}
	bounds := max(n4*2*bkGroup/3, 1) // pieces per group: one after each 3-row tile
	var st decState
	// the group after (g, kb)
	next := func(g, kb int) (int, int) {
		if g+1 < ng {
			return g + 1, kb
		}
		return 0, kb + cb
	}
	setup := func(w *[bkGroup * bkWW]uint16, g, kb int) {
		gr := r0 + g*bkGroup
		k := min(bkGroup, r1-gr)
		kl := min(cb, n8-kb)
		pg, pkb := next(g, kb)
		pr, pk := r0+pg*bkGroup, pkb
		if pk >= n8 || pr+k > m.Rows {
			pr, pk = gr, kb
		}
		m.setDec(&st, w, gr, k, kb, kl, pr, pk, (k*kl/MXGroup+bounds-1)/bounds)
	}
	cur := 0
	setup(&sc.ww[0], 0, 0)
	st.k = 1 << 30
	decPieceMXAVX2(&st)
	a := tileArgs{xstride: xs * 8, accRow: T * Lanes * 8, ctrl: &mxWordCtrl, dec: &st}
	for kb := 0; kb < n8; kb += cb {
		a.n = min(cb, n8-kb) / 8
		for g := 0; g < ng; g++ {
			a.w = unsafe.Pointer(&sc.ww[cur][0])
			ngg, nkb := next(g, kb)
			if nkb < n8 {
				setup(&sc.ww[cur^1], ngg, nkb)
			} else {
				st.rows = 0
			}
			runTiles(&mxTiles, &a, xd, acc, xs, T, groups, g, kb)
			if st.rows > 0 {
				st.k = 1 << 30
				decPieceMXAVX2(&st)
			}
			cur ^= 1
		}
	}
}

// bkGroupBuffered is the whole row of a short last group g (k < bkGroup
// bf16 rows from gr) of the fused path through the buffer, the decoded
// weights scaled back to w: the activations are not scaled there.
func (m *Mat) bkGroupBuffered(sc *bkScratch, xd, acc []float64, xs, T int, groups []int, g, gr, k, n8 int) {
	a := tileArgs{w: unsafe.Pointer(&sc.w[0]), xstride: xs * 8, accRow: T * Lanes * 8}
	for kb := 0; kb < n8; kb += bkCols {
		kl := min(bkCols, n8-kb)
		a.n = kl / 8
		m.decodeGroup(&sc.w, gr, k, kb, kl, gr, kb)
		for j := 0; j < k; j++ {
			for i := range sc.w[j*bkWS : j*bkWS+kl] {
				sc.w[j*bkWS+i] *= 0x1p896 // back to w: exact
			}
		}
		m.groupTiles(&a, xd, acc, xs, T, groups, g, kb)
	}
}

// fusedGroup multiplies the bkGroup bf16 rows from gr with the tokens (2 <=
// T <= fusedMaxT: groups of 4, 3 and 2), widening the weights from the
// matrix inside the tile kernels (dtile*) once per group of tokens; 6 rows
// at a time, so that the rows are in L1 for the second group.
func (m *Mat) fusedGroup(da *dtileArgs, xd, acc []float64, xs, T int, groups []int, gr, g, kb, kl int) {
	n := m.Cols
	da.n = kl / 8
	for rr := 0; rr < bkGroup; rr += 6 {
		t0 := 0
		for _, tg := range groups {
			da.x = &xd[t0*xs+kb]
			tile := func(r int, f func(*dtileArgs)) {
				da.acc = &acc[((g*bkGroup+r)*T+t0)*Lanes]
				da.src = unsafe.Pointer(&m.BF16[(gr+r)*n+kb])
				f(da)
			}
			switch tg {
			case 4:
				tile(rr, dtile3x4BF16AVX2)
				tile(rr+3, dtile3x4BF16AVX2)
			case 3:
				tile(rr, dtile3x3BF16AVX2)
				tile(rr+3, dtile3x3BF16AVX2)
			default:
				tile(rr, dtile6x2BF16AVX2)
			}
			t0 += tg
		}
	}
}

// decodeGroup decodes columns [kb, kb+kl) of rows [r, r+k) to float64 rows
// bkWS apart in w (bf16 scaled by 2^-896); the rows of the group past k are
// zeros. It prefetches kl columns from pk of rows [pr, pr+k), the block it
// will decode next (pr, pk = r, kb: none).
func (m *Mat) decodeGroup(w *[bkGroup * bkWS]float64, r, k, kb, kl, pr, pk int) {
	n := m.Cols
	for j := k; j < bkGroup; j++ {
		clear(w[j*bkWS : j*bkWS+kl])
	}
	switch m.DType {
	case F32:
		for j := 0; j < k; j++ {
			decodeF32AVX2(&m.F32[(r+j)*n+kb], &w[j*bkWS], kl)
		}
	default:
		a := newDecArgs()
		a.src, a.stride = unsafe.Pointer(&m.BF16[r*n+kb]), 2*n
		a.pf = unsafe.Pointer(&m.BF16[pr*n+pk])
		a.dst, a.n, a.rows = &w[0], kl, k
		if !decodeRowsBF16AVX2(&a) {
			for j := 0; j < k; j++ {
				out := w[j*bkWS : j*bkWS+kl]
				for i, v := range m.BF16[(r+j)*n+kb : (r+j)*n+kb+kl] {
					out[i] = float64(BF16ToF32(v)) * 0x1p-896 // exact for Inf, NaN and subnormals
				}
			}
		}
	}
}

// tile3x4AVX2 multiplies the 12 decoded rows at a.w (bkWS float64s apart)
// with 4 tokens (a.x, a.xstride bytes apart), adding to the lanes at a.acc
// (read and written):
//
//	for r := 0; r < 12; r++ {
//		for t := 0; t < 4; t++ {
//			lanes := a.acc[r*a.accRow/8+t*8:][:8]
//			x := a.x[t*a.xstride/8:]
//			for i := 0; i < 8*a.n; i++ {
//				lanes[i%8] += a.w[r*bkWS+i] * x[i]
//			}
//		}
//	}
//
// as 4 tiles of 3 rows, each half of the lanes in turn (a.n >= 1). The
// products are exact (weights decoded exactly, activations widened from
// float32), so the fused multiply-adds equal the loop's multiply-then-add.
//
//go:noescape
func tile3x4AVX2(a *tileArgs)

// tile4x3AVX2 is tile3x4AVX2 for 3 tokens (t < 3), as 3 tiles of 4 rows.
//
//go:noescape
func tile4x3AVX2(a *tileArgs)

// tile6x2AVX2 is tile3x4AVX2 for 2 tokens (t < 2), as 2 tiles of 6 rows.
//
//go:noescape
func tile6x2AVX2(a *tileArgs)

// tile12x1AVX2 is tile3x4AVX2 for 1 token (t < 1), as one tile of 12 rows.
//
//go:noescape
func tile12x1AVX2(a *tileArgs)

// The fused bf16 tile kernels: tile3x4AVX2 and its kin with the weights
// widened from the matrix rather than read from a buffer, for T <=
// fusedMaxT. dtileRxTBF16AVX2 covers R rows from a.src
// (a.stride bytes apart) and T tokens, both halves of the lanes, adding to
// a.acc (read and written):
//
//	for r := 0; r < R; r++ {
//		for t := 0; t < T; t++ {
//			lanes := a.acc[r*a.accRow/8+t*8:][:8]
//			x := a.x[t*a.xstride/8:]
//			for i := 0; i < 8*a.n; i++ {
//				lanes[i%8] += float64(BF16ToF32(src[r][i])) * x[i]
//			}
//		}
//	}
//
// with each weight widened exactly (16-bit shift, VCVTPS2PD: Inf, NaN and
// subnormals included) and x the plain widened activations; a.n >= 1. Each
// row is prefetched 1 KiB ahead, as in the row kernels.

//go:noescape
func dtile3x4BF16AVX2(a *dtileArgs)

//go:noescape
func dtile3x3BF16AVX2(a *dtileArgs)

//go:noescape
func dtile6x2BF16AVX2(a *dtileArgs)

// decodeRowsBF16AVX2 decodes a.rows bf16 rows of a.n elements to float64
// scaled by 2^-896 (the activations are scaled by 2^896, so each product is
// the exact float64(w)*float64(x) of the portable path), prefetching the
// next block:
//
//	for r := 0; r < a.rows; r++ {
//		for i := 0; i < a.n; i++ {
//			dst[r*bkWS+i] = float64(BF16ToF32(src[r][i])) * 0x1p-896 // exact, subnormals too
//		}
//	}
//	finite = no src[r][i] has the exponent 255
//
// An Inf or NaN weight decodes to a finite number, so when finite is false
// the caller decodes the rows again exactly (decodeBF16Scaled).
//
//go:noescape
func decodeRowsBF16AVX2(a *decArgs) (finite bool)

// The MXFP4 tiles: tile4x3AVX2 and its kin (and tile3x4MXAVX2 below) with
// a.w the 16-bit words of the group (rows bkWW apart, in the even/odd order
// of mxEOPerm, as are a.x and a.acc): each weight is w =
// float64frombits(word << 48), built in registers (a.ctrl = &mxWordCtrl).
//
//go:noescape
func tile4x3MXAVX2(a *tileArgs)

//go:noescape
func tile6x2MXAVX2(a *tileArgs)

//go:noescape
func tile12x1MXAVX2(a *tileArgs)

// tile3x4MXAVX2 is the MXFP4 tile of 3 rows x 4 tokens that also runs,
// after each of its 8 3-row tiles, a piece of a.dec (up to a.dec.k units).
//
//go:noescape
func tile3x4MXAVX2(a *tileArgs)

// decPieceMXAVX2 runs up to st.k units of st: for each row r and unit u,
//
//	for i := 0; i < 32; i++ {
//		e := 32*u + i
//		c := packed[r][e/2] >> (4 * (e % 2)) & 15
//		word := uint16(math.Float64bits(mxTable[scales[r][u]][c]) >> 48)
//		w[r*bkWW+32*u+16*(i/16)+8*(i%2)+(i%16)/2] = word // the even/odd order
//	}
//
// zeros for the NaN scale 255.
//
//go:noescape
func decPieceMXAVX2(st *decState)
