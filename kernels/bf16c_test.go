package kernels

import (
	"encoding/binary"
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
	_, err := BF16CFromBytes(alignedCopy(good)[:head-1], 4, 96)
	assert.ErrorContains(t, err, "row offsets")
}
