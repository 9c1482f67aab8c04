package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trainedBF16 draws weights shaped like a trained matrix's: normal with a
// per-row scale, so most blocks' exponents span fewer than 16 values and a
// few (a tiny weight, an exact zero) do not.
func trainedBF16(r *rand.Rand, rows, cols int) *Mat {
	m := &Mat{DType: BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	for i := 0; i < rows; i++ {
		s := math.Ldexp(1, -r.IntN(8)-3)
		for j := 0; j < cols; j++ {
			m.BF16[i*cols+j] = F32ToBF16(float32(r.NormFloat64() * s))
		}
	}
	return m
}

// specialBF16 puts every kind of bf16 value into some blocks: zeros of both
// signs, subnormals, the largest finite values, infinities and NaNs, and
// blocks spanning exactly 15 and 16 exponents (the edge of compressible).
func specialBF16(r *rand.Rand, m *Mat) {
	specials := []uint16{0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0080, 0x3f80}
	for b := 0; b*BF16CBlock < len(m.BF16); b += 3 {
		w := m.BF16[b*BF16CBlock : min((b+1)*BF16CBlock, len(m.BF16))]
		switch b % 4 {
		case 0:
			w[r.IntN(len(w))] = specials[r.IntN(len(specials))]
		case 1: // exponents e..e+15: compressible
			e := uint16(r.IntN(240))
			for j := range w {
				w[j] = (e+uint16(j%16))<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
			}
		case 2: // e..e+16: raw
			e := uint16(r.IntN(239))
			for j := range w {
				w[j] = (e+uint16(j%17))<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
			}
		}
	}
}

func TestBF16CRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 19))
	for _, cols := range []int{1, 7, 31, 32, 33, 64, 100, 255, 1024, 7168 + 16} {
		m := trainedBF16(r, 9, cols)
		if cols%2 == 1 {
			specialBF16(r, m)
		}
		c := CompressBF16(m)
		require.NoError(t, c.Check())
		row := make([]uint16, cols)
		for i := 0; i < m.Rows; i++ {
			c.DecodeRowBF16(i, row)
			require.Equal(t, m.BF16[i*cols:(i+1)*cols], row, "cols %d row %d", cols, i)
		}
		// the serialised form binds back to the same matrix, aliased
		b := BF16CBytes(&c)
		require.Equal(t, BF16CSize(c.Rows, int64(len(c.Z))), int64(len(b)))
		require.Equal(t, int64(len(b)), c.Bytes())
		back, err := BF16CFromBytes(alignedCopy(b), m.Rows, cols)
		require.NoError(t, err)
		assert.Equal(t, c.Z, back.Z)
		// no row is longer than bf16 plus one header byte per block
		for i := 0; i < m.Rows; i++ {
			nb := (cols + 31) / 32
			assert.LessOrEqual(t, len(c.bf16cRow(i)), 2*cols+nb)
		}
	}
}

// alignedCopy copies b into 8-byte aligned memory, as a trunk buffer is.
func alignedCopy(b []byte) []byte {
	u := make([]uint64, (len(b)+7)/8+1)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), len(u)*8)[:len(b)]
	copy(out, b)
	return out
}

// TestBF16CMatchesBF16 holds the point of the format: every product of a
// BF16C matrix is bit-identical to the bf16 matrix it was made from, on
// every level and thread count, including raw blocks and special values.
func TestBF16CMatchesBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	pools := []*Pool{nil, NewPool(2), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, sh := range [][2]int{{1, 32}, {3, 33}, {13, 64}, {17, 96}, {31, 257}, {64, 1024}, {9, 2048 + 40}} {
		m := trainedBF16(r, sh[0], sh[1])
		specialBF16(r, m)
		c := CompressBF16(m)
		for _, T := range []int{1, 2, 3, 5, 8, 9, 16, 33} {
			x := specialVec(r, T*sh[1])
			for l := 0; l < len(x)/3; l++ {
				x[l] = float32(r.NormFloat64()) // mostly ordinary activations
			}
			want := matMulAt(LevelPortable, nil, m, x, T)
			for _, l := range Levels() {
				for _, p := range pools {
					got := matMulAt(l, p, &c, x, T)
					compare(t, "bf16c "+l.String(), got, want)
				}
			}
		}
		for i := 0; i < m.Rows; i++ {
			x := specialVec(r, sh[1])
			assert.True(t, same(DotBF16(m.BF16[i*sh[1]:(i+1)*sh[1]], x), c.RowDot(i, x)))
		}
		// a row range of the compressed matrix is the compressed row range
		lo, hi := sh[0]/3, sh[0]-sh[0]/4
		sub := c.RowRange(lo, hi)
		require.NoError(t, sub.Check())
		bsub := m.RowRange(lo, hi)
		x := specialVec(r, sh[1])
		compare(t, "bf16c rows", matMulAt(LevelPortable, nil, &sub, x, 1), matMulAt(LevelPortable, nil, &bsub, x, 1))
	}
}

// TestBF16CRatio: trained-like weights compress to 49/64 of bf16 or a
// little more (the row offsets and the few raw blocks).
func TestBF16CRatio(t *testing.T) {
	m := trainedBF16(rand.New(rand.NewPCG(1, 1)), 64, 4096)
	c := CompressBF16(m)
	ratio := float64(m.Bytes()) / float64(c.Bytes())
	assert.Greater(t, ratio, 1.28)
	assert.LessOrEqual(t, ratio, 64.0/49)
}

// TestBF16CRefusesCorrupt: offsets or headers that do not match the row
// lengths are refused before any kernel walks them.
func TestBF16CRefusesCorrupt(t *testing.T) {
	m := trainedBF16(rand.New(rand.NewPCG(2, 2)), 4, 96)
	c := CompressBF16(m)
	good := BF16CBytes(&c)
	bind := func(mut func(b []byte)) error {
		b := alignedCopy(good)
		mut(b)
		_, err := BF16CFromBytes(b, 4, 96)
		return err
	}
	require.NoError(t, bind(func([]byte) {}))
	head := 8 * 5
	assert.ErrorContains(t, bind(func(b []byte) { b[head] = BF16CRaw }), "headers say") // a compressed block marked raw
	assert.ErrorContains(t, bind(func(b []byte) { binary.LittleEndian.PutUint64(b[8:], 3) }), "row 0 has")
	assert.ErrorContains(t, bind(func(b []byte) { binary.LittleEndian.PutUint64(b[0:], 1) }), "first row offset")
	assert.ErrorContains(t, bind(func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 1<<40) }), "offsets span")
	// a middle offset past the end (the last one right) is refused, not a panic
	assert.ErrorContains(t, bind(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 1<<40) }), "row 1 has a bad offset")
	assert.ErrorContains(t, bind(func(b []byte) { binary.LittleEndian.PutUint64(b[16:], binary.LittleEndian.Uint64(b[32:])+1) }), "bad offset")
	_, err := BF16CFromBytes(alignedCopy(good)[:head-1], 4, 96)
	assert.ErrorContains(t, err, "row offsets")
}

// bf16cPatterned is a trained-like bf16 matrix whose rows place raw blocks
// by pattern (none, the first, the last full, a middle one, every one, a
// random third) and whose compressed blocks include the extremes of the
// exponent range: base 0 (zeros of both signs, subnormals) and blocks that
// reach exponent 255 (Inf and NaN stored with 4-bit offsets). want[i][b]
// says whether full block b of row i must be raw.
func bf16cPatterned(r *rand.Rand, rows, cols int) (m *Mat, want [][]bool) {
	m = trainedBF16(r, rows, cols)
	// opposite weights in the column pairs that cancelX2 gives huge equal
	// activations: the lanes then hold huge partial sums that cancel in the
	// combine tree, so any change of lane or order shows in the result
	for i := 0; i+1 < len(m.BF16); i += 2 {
		if c := i % cols; c+1 < cols && c/2%3 == 1 {
			m.BF16[i+1] = m.BF16[i] ^ 0x8000
		}
	}
	full := cols / BF16CBlock
	want = make([][]bool, rows)
	for i := 0; i < rows; i++ {
		want[i] = make([]bool, full)
		for b := 0; b < full; b++ {
			switch i % 6 {
			case 1:
				want[i][b] = b == 0
			case 2:
				want[i][b] = b == full-1
			case 3:
				want[i][b] = b == full/2
			case 4:
				want[i][b] = true
			case 5:
				want[i][b] = r.IntN(3) == 0
			}
			w := m.BF16[i*cols+b*BF16CBlock : i*cols+(b+1)*BF16CBlock]
			switch {
			case want[i][b]:
				w[r.IntN(32)] = uint16(r.IntN(128)) | uint16(r.IntN(2))<<15 // exponent 0 among ~2^-3..2^-10
			case (i+b)%7 == 3: // exponents 0..15: zeros, subnormals, tiny normals
				for j := range w {
					w[j] = uint16(r.IntN(16))<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
				}
				w[r.IntN(32)], w[r.IntN(32)] = 0x8000, 0
			case (i+b)%7 == 5: // exponents 241..255: huge values, Inf, NaN
				for j := range w {
					w[j] = uint16(241+r.IntN(15))<<7 | uint16(r.IntN(128)) | uint16(r.IntN(2))<<15
				}
				w[r.IntN(32)] = 0x7f80 | uint16(r.IntN(2))<<15 // ±Inf
				w[r.IntN(32)] = 0x7fc0 | uint16(r.IntN(64))    // a NaN
			default: // lift the rare tiny weight so the block compresses
				hi := uint16(0)
				for _, v := range w {
					hi = max(hi, v>>7&0xff)
				}
				for j, v := range w {
					if e := v >> 7 & 0xff; e+15 < hi {
						w[j] = v&0x807f | (hi-15)<<7
					}
				}
			}
		}
	}
	return m, want
}

// TestBF16CKernelShapes drives every branch of the BF16C SIMD kernels: raw
// blocks at the start, middle and end of rows, rows of mixed and of only raw
// blocks, compressed blocks holding Inf, NaN and subnormals, columns with
// and without a short last block (and not a multiple of 8), row counts
// around the 4 rows in flight and the 48-row panels, T = 1..9 (every token
// grouping of the row kernels), 16 and 33 (the mat-mat path, several column
// blocks), 1..4 threads, and a row range of the matrix (offsets not from 0).
func TestBF16CKernelShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	pools := []*Pool{nil, NewPool(1), NewPool(2), NewPool(3), NewPool(4)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	shapes := [][2]int{{1, 32}, {2, 40}, {3, 64}, {5, 95}, {6, 96}, {7, 263}, {9, 256}, {13, 1024}, {50, 544}, {101, 1056 + 21}}
	tokens := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33}
	for _, sh := range shapes {
		m, raw := bf16cPatterned(r, sh[0], sh[1])
		c := CompressBF16(m)
		require.NoError(t, c.Check())
		for i := range raw {
			for b, isRaw := range raw[i] {
				require.Equal(t, isRaw, c.bf16cRow(i)[b] == BF16CRaw, "%v row %d block %d", sh, i, b)
			}
		}
		for _, T := range tokens {
			if T > 9 && sh[1] < 256 && T != 16 {
				continue
			}
			x := cancelX2(r, T, sh[1])
			want := matMulAt(LevelPortable, nil, m, x, T)
			for _, l := range Levels() {
				for pi, p := range pools {
					if pi > 1 && T > 3 && T != 8 && T != 9 && T != 33 {
						continue // threads 2..4 on a few token counts keep the run short
					}
					compare(t, fmt.Sprintf("%v %dx%d T=%d threads=%d", l, sh[0], sh[1], T, p.Threads()), matMulAt(l, p, &c, x, T), want)
				}
			}
		}
		// a row range (ZOff[0] > 0) and the serialised, aliased form
		lo, hi := sh[0]/3, sh[0]
		sub, bsub := c.RowRange(lo, hi), m.RowRange(lo, hi)
		back, err := BF16CFromBytes(alignedCopy(BF16CBytes(&c)), sh[0], sh[1])
		require.NoError(t, err)
		for _, T := range []int{1, 4, 9} {
			x := specialVec(r, T*sh[1])
			for _, l := range Levels() {
				compare(t, fmt.Sprintf("%v rows %d..%d of %v T=%d", l, lo, hi, sh, T), matMulAt(l, pools[2], &sub, x, T), matMulAt(LevelPortable, nil, &bsub, x, T))
				compare(t, fmt.Sprintf("%v bound %v T=%d", l, sh, T), matMulAt(l, pools[2], &back, x, T), matMulAt(LevelPortable, nil, m, x, T))
			}
		}
	}
}

// cancelX2 is T tokens of cols ordinary activations, except that the
// column pairs bf16cPatterned made opposite get one huge value each.
func cancelX2(r *rand.Rand, T, cols int) []float32 {
	x := make([]float32, T*cols)
	for t := 0; t < T; t++ {
		for c := 0; c < cols; c++ {
			x[t*cols+c] = float32(r.NormFloat64())
			if c%2 == 1 && c/2%3 == 1 {
				v := float32(r.NormFloat64() * math.Ldexp(1, 26+r.IntN(8)))
				x[t*cols+c-1], x[t*cols+c] = v, v
			}
		}
	}
	return x
}

// TestBF16CNonFinite: Inf and NaN activations (also against zero weights,
// 0·Inf = NaN), huge products that overflow, and Inf/NaN weights in both
// raw and compressed blocks give the portable result on every level.
func TestBF16CNonFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2))
	m, _ := bf16cPatterned(r, 23, 320+9)
	for i := 0; i < len(m.BF16); i += 97 {
		m.BF16[i] = 0 // exact zeros meet the Inf activations below
	}
	c := CompressBF16(m)
	p := NewPool(2)
	defer p.Close()
	for _, T := range []int{1, 2, 3, 4, 7, 8, 12} {
		for trial := 0; trial < 3; trial++ {
			x := make([]float32, T*m.Cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			switch trial {
			case 0: // Inf and NaN activations
				for i := 0; i < len(x); i += 41 {
					x[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[r.IntN(3)]
				}
			case 1: // huge activations: products beyond float32, sums to ±Inf
				for i := range x {
					x[i] *= math.MaxFloat32 / 4
				}
			default:
				x = specialVec(r, T*m.Cols)
			}
			want := matMulAt(LevelPortable, nil, m, x, T)
			for _, l := range Levels() {
				for _, pp := range []*Pool{nil, p} {
					compare(t, fmt.Sprintf("%v T=%d trial %d", l, T, trial), matMulAt(l, pp, &c, x, T), want)
				}
			}
		}
	}
}

func BenchmarkCompressBF16(b *testing.B) {
	m := trainedBF16(rand.New(rand.NewPCG(1, 2)), 1024, 7168)
	b.SetBytes(m.Bytes())
	for b.Loop() {
		CompressBF16(m)
	}
}

func BenchmarkDecodeRowBF16(b *testing.B) {
	m := trainedBF16(rand.New(rand.NewPCG(1, 3)), 256, 7168)
	c := CompressBF16(m)
	row := make([]uint16, m.Cols)
	b.SetBytes(m.Bytes())
	for b.Loop() {
		for r := 0; r < c.Rows; r++ {
			c.DecodeRowBF16(r, row)
		}
	}
}
