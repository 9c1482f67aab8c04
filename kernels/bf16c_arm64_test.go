package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Row patterns of bf16cPatternMat: where a row's raw blocks are.
const (
	patRawFirst = iota
	patRawMiddle
	patRawLast
	patPacked // every full block compressed
	patAllRaw
	patAlternate
	patRandom
	patSpecial // compressed blocks holding Inf, NaN, zeros and subnormals
	patCount
)

// packedBlock fills w with 32 weights whose exponents lie in e..e+15 (a
// compressed block), every sign and mantissa drawn; most are within a
// factor 16 of each other, so the order of a sum shows in its rounding.
func packedBlock(r *rand.Rand, w []uint16, e int) {
	for j := range w {
		off := 12 + r.IntN(4)
		if r.IntN(4) == 0 {
			off = r.IntN(16)
		}
		w[j] = uint16(e+off)<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
	}
	w[r.IntN(len(w))] = uint16(e) << 7 // the base itself occurs
}

// rawBlock fills w with weights spanning more than 16 exponents (a raw
// block), one of them a special value.
func rawBlock(r *rand.Rand, w []uint16) {
	plainRawBlock(r, w)
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1}
	w[r.IntN(len(w))] = specials[r.IntN(len(specials))]
	w[0] = 0x0001 // exponent 0 next to ~100: never compressible
}

// plainRawBlock is a raw block of ordinary values (exponents 100 and
// 120..127).
func plainRawBlock(r *rand.Rand, w []uint16) {
	for j := range w {
		w[j] = uint16(120+r.IntN(8))<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
	}
	w[r.IntN(len(w))] = 100<<7 | uint16(r.IntN(128))
}

// specialBlock is a compressed block of extreme exponents: 240..255 (the
// largest finite values, infinities and NaNs: base + offset reaches 255) or
// 0..15 (zeros of both signs and subnormals).
func specialBlock(r *rand.Rand, w []uint16) {
	e, specials := 240, []uint16{0x7f80, 0xff80, 0x7fc1, 0xff7f}
	if r.IntN(2) == 0 {
		e, specials = 0, []uint16{0x8000, 0x0001, 0x807f, 0x0000}
	}
	packedBlock(r, w, e)
	for _, v := range specials {
		w[1+r.IntN(31)] = v
	}
	w[0] = uint16(e) << 7
}

// bf16cPatternMat is a bf16 matrix whose row i has the raw blocks of
// pattern (i+shift)%patCount (the short last block, if any, is always raw),
// so a 4-row block of the row kernel mixes patterns in every slot.
func bf16cPatternMat(r *rand.Rand, rows, cols, shift int) *Mat {
	m := &Mat{DType: BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	full := cols / BF16CBlock
	for i := 0; i < rows; i++ {
		pat := (i + shift) % patCount
		row := m.BF16[i*cols : (i+1)*cols]
		for k := 0; k*BF16CBlock < cols; k++ {
			w := row[k*BF16CBlock : min((k+1)*BF16CBlock, cols)]
			if k == full { // short last block
				rawBlock(r, w)
				continue
			}
			raw := false
			switch pat {
			case patRawFirst:
				raw = k == 0
			case patRawMiddle:
				raw = k == full/2 && full > 2
			case patRawLast:
				raw = k == full-1
			case patAllRaw:
				raw = true
			case patAlternate:
				raw = k%2 == 1
			case patRandom:
				raw = r.IntN(3) == 0
			}
			switch {
			case raw:
				rawBlock(r, w)
			case pat == patSpecial && k%2 == 0:
				specialBlock(r, w)
			default:
				packedBlock(r, w, 110+r.IntN(20))
			}
		}
	}
	return m
}

// TestBF16CPatternMat: the builder makes the blocks it says it does.
func TestBF16CPatternMat(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	m := bf16cPatternMat(r, patCount, 5*32+7, 0)
	c := CompressBF16(m)
	kinds := make([]string, m.Rows)
	for i := range kinds {
		for _, h := range c.bf16cRow(i)[:6] {
			if h == BF16CRaw {
				kinds[i] += "r"
			} else {
				kinds[i] += "c"
			}
		}
	}
	assert.Equal(t, []string{"rccccr", "ccrccr", "ccccrr", "cccccr", "rrrrrr", "crcrcr", kinds[patRandom], "cccccr"}, kinds)
	assert.Contains(t, kinds[patRandom], "r")
	var special []byte
	for i := 0; i < 5; i += 2 {
		special = append(special, c.bf16cRow(patSpecial)[i])
	}
	assert.Subset(t, []byte{0, 240}, special, "special blocks' bases")
}

// lanesRef is the contract lanes of the first 32*full weights of a BF16C
// row with x.
func lanesRef(z []byte, cols, full int, x []float64) [Lanes]float64 {
	w := make([]uint16, cols)
	decodeBF16CRow(z, cols, w)
	var l [Lanes]float64
	for i := 0; i < full*BF16CBlock; i++ {
		l[i%8] += float64(BF16ToF32(w[i])) * x[i]
	}
	return l
}

func sameLanes(t *testing.T, what string, got, want []float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		if want[i] != want[i] && got[i] != got[i] {
			continue
		}
		require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s lane %d: %v, want %v", what, i, got[i], want[i])
	}
}

func widenAll(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestBF16CNEONKernels calls both kernels directly and compares their raw
// lanes with the contract bit for bit: every row slot of the row kernel
// with every pattern, and the mat-mat kernel over column runs of every
// length it gets.
func TestBF16CNEONKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	for _, cols := range []int{32, 63, 64, 100, 8*32 + 8, 21 * 32} {
		full := cols / BF16CBlock
		nb := (cols + 31) / 32
		for shift := 0; shift < patCount; shift++ {
			m := bf16cPatternMat(r, 4, cols, shift)
			c := CompressBF16(m)
			x := specialVec(r, cols)
			xd := widenAll(x)
			var rows [4]*byte
			for j := range rows {
				rows[j] = &c.bf16cRow(j)[0]
			}
			var acc [32]float64
			bf16cRows4NEON(&rows, nb, &xd[0], full, &acc)
			for j := 0; j < 4; j++ {
				want := lanesRef(c.bf16cRow(j), cols, full, xd)
				sameLanes(t, fmt.Sprintf("rows4 cols %d shift %d row %d", cols, shift, j), acc[j*8:j*8+8], want[:])
			}
		}
		for _, T := range []int{1, 2, 9} {
			rows := 11
			m := bf16cPatternMat(r, rows, cols, T)
			c := CompressBF16(m)
			x := specialVec(r, T*cols)
			xw := make([]float64, full*T*32) // [block][token][32]
			for k := 0; k < full; k++ {
				for tt := 0; tt < T; tt++ {
					for i := 0; i < 32; i++ {
						xw[(k*T+tt)*32+i] = float64(x[tt*cols+k*32+i])
					}
				}
			}
			acc := make([]float64, rows*T*8)
			hdr := make([]int, rows)
			body := make([]int, rows)
			for j := range hdr {
				hdr[j] = int(c.ZOff[j])
				body[j] = hdr[j] + nb
			}
			a := bf16cGemmArgs{z: &c.Z[0], hdr: &hdr[0], body: &body[0], nr: rows, T: T, acc: &acc[0]}
			for k, run := 0, 1; k < full; k, run = k+run, run+1 { // runs 1, 2, 3, ...
				a.nblk = min(run, full-k)
				a.x = &xw[k*T*32]
				bf16cGemmNEON(&a)
			}
			for j := 0; j < rows; j++ {
				// the offsets end at the short block (or the row's end)
				assert.Equal(t, int(c.ZOff[j])+full, hdr[j])
				wantBody := int(c.ZOff[j+1])
				if cols%32 != 0 {
					wantBody -= 2 * (cols % 32)
				}
				assert.Equal(t, wantBody, body[j])
				for tt := 0; tt < T; tt++ {
					want := lanesRef(c.bf16cRow(j), cols, full, widenAll(x[tt*cols:(tt+1)*cols]))
					sameLanes(t, fmt.Sprintf("gemm cols %d T %d row %d token %d", cols, T, j, tt), acc[(j*T+tt)*8:][:8], want[:])
				}
			}
		}
	}
}

// TestBF16CNEONMatMul: MatMul of BF16C matrices on NEON equals portable
// bf16 over shapes that hit every branch of the drivers: columns below 32
// (portable), multiples of 32 and not (of 8 either), rows not a multiple of
// 4 or of a panel, row chunks split among threads, T = 1..9, 16, 33, and
// Inf/NaN/subnormal weights in raw and compressed blocks.
func TestBF16CNEONMatMul(t *testing.T) {
	require.Equal(t, LevelNEON, BestLevel())
	r := rand.New(rand.NewPCG(19, 2))
	pools := []*Pool{nil, NewPool(1), NewPool(2), NewPool(3), NewPool(4)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	shapes := [][2]int{{5, 31}, {1, 32}, {3, 40}, {6, 47}, {9, 64}, {13, 103}, {50, 287}, {97, 1024 + 24}, {210, 1024}}
	tokens := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33}
	for si, sh := range shapes {
		m := bf16cPatternMat(r, sh[0], sh[1], si)
		c := CompressBF16(m)
		require.NoError(t, c.Check())
		for ti, T := range tokens {
			if sh[0]*sh[1] > 1<<16 && T != 1 && T != 8 && T != 9 && T != 33 {
				continue // qemu: the big shapes at the path edges only
			}
			x := specialVec(r, T*sh[1])
			for i := range x {
				if r.IntN(30) != 0 {
					x[i] = float32(r.NormFloat64()) // mostly ordinary activations
				}
			}
			want := matMulAt(LevelPortable, nil, m, x, T)
			for pi, p := range pools {
				if (si+ti+pi)%2 == 1 && p != nil && sh[0] > 50 {
					continue
				}
				got := matMulAt(LevelNEON, p, &c, x, T)
				compare(t, fmt.Sprintf("%dx%d T=%d threads %d", sh[0], sh[1], T, p.Threads()), got, want)
			}
		}
	}
}

// TestBF16CNEONNonFinite: Inf and NaN activations (every row kernel slot
// and token of the mat-mat kernel sees some) give the portable result.
func TestBF16CNEONNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 3))
	m := bf16cPatternMat(r, 23, 300, 0)
	c := CompressBF16(m)
	for _, T := range []int{1, 4, 9, 17} {
		x := specialVec(r, T*300)
		for i := 0; i < len(x); i += 37 {
			x[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[i%3]
		}
		want := matMulAt(LevelPortable, nil, m, x, T)
		compare(t, fmt.Sprintf("non-finite T=%d", T), matMulAt(LevelNEON, nil, &c, x, T), want)
	}
}

// TestBF16CNEONDispatch: BF16C runs on the NEON kernels exactly when a row
// has a full block.
func TestBF16CNEONDispatch(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 4))
	for _, cols := range []int{1, 31, 32, 33} {
		c := CompressBF16(trainedBF16(r, 3, cols))
		dst := make([]float32, 3)
		withLevel(LevelNEON, func() {
			assert.Equal(t, cols >= 32, simdMatMul(nil, dst, &c, make([]float32, cols), 1), "cols %d", cols)
		})
		withLevel(LevelPortable, func() {
			assert.False(t, simdMatMul(nil, dst, &c, make([]float32, cols), 1))
		})
	}
}

// TestBF16CNEONOrder makes the order of the sums visible in the float32
// result: columns 2k and 2k+1 of the compressed "huge" blocks carry opposite
// weights up to 2^55 and the same activation, so the huge partial sums
// cancel in the last add of the combine tree and their float64 rounding
// (which depends on every lane's order) decides the result; raw blocks and
// ordinary compressed blocks sit in between.
func TestBF16CNEONOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 5))
	const rows, cols = 13, 12*32 + 8
	m := &Mat{DType: BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	for i := 0; i < rows; i++ {
		for k := 0; k*32 < cols; k++ {
			w := m.BF16[i*cols+k*32 : min(i*cols+(k+1)*32, (i+1)*cols)]
			switch {
			case len(w) < 32 || (i+k)%5 == 0:
				plainRawBlock(r, w)
			case (i+k)%3 == 0:
				packedBlock(r, w, 120)
			default:
				packedBlock(r, w, 167) // exponents 167..182: 2^40..2^55
				for j := 0; j < 32; j += 2 {
					w[j+1] = w[j] ^ 0x8000
				}
			}
		}
	}
	c := CompressBF16(m)
	for _, T := range []int{1, 3, 9, 16} {
		var x []float32
		for tt := 0; tt < T; tt++ {
			x = append(x, cancelX(r, cols)...)
		}
		want := matMulAt(LevelPortable, nil, m, x, T)
		compare(t, fmt.Sprintf("order T=%d", T), matMulAt(LevelNEON, nil, &c, x, T), want)
	}
}
