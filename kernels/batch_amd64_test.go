package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestDecPieceMX runs the MXFP4 word decoder of the small-batch path in
// pieces of every size over groups of 1 to 12 rows and 1 to 8 units, every
// scale (255 included) and random codes, against the words of mxTable in
// the even/odd order of the tiles; rows past the group stay untouched.
func TestDecPieceMX(t *testing.T) {
	if CurrentLevel() < LevelAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, rows := range []int{1, 2, 5, 11, 12} {
		for _, units := range []int{1, 3, 8} {
			cols := 9 * MXGroup // the block starts one unit into the row
			m := &Mat{DType: MXFP4, Rows: rows + 1, Cols: cols, Packed: make([]byte, (rows+1)*cols/2), Scales: make([]byte, (rows+1)*cols/MXGroup)}
			for i := range m.Packed {
				m.Packed[i] = byte(r.Uint32())
			}
			for i := range m.Scales {
				m.Scales[i] = byte(r.Uint32())
			}
			m.Scales[cols/MXGroup+1] = 255
			for _, per := range []int{1, 2, 5, 1 << 30} {
				var w [bkGroup * bkWW]uint16
				for i := range w {
					w[i] = 0xdead
				}
				var st decState
				m.setDec(&st, &w, 1, rows, MXGroup, units*MXGroup, 0, 0, per)
				calls := 0
				for st.rows > 0 {
					decPieceMXAVX2(&st)
					calls++
					require.LessOrEqual(t, calls, rows*units+1)
				}
				if per < 1<<30 {
					require.GreaterOrEqual(t, calls, (rows*units+per-1)/per, "pieces of %d", per)
				}
				for j := 0; j < bkGroup; j++ {
					for i := 0; i < units*MXGroup; i++ {
						got := w[j*bkWW+32*(i/32)+16*(i%32/16)+8*(i%2)+(i%16)/2]
						var want uint16 // rows past the group: cleared by setDec
						if j < rows {
							want = uint16(math.Float64bits(MXFP4Value(m.Packed[(1+j)*cols/2:], m.Scales[(1+j)*cols/MXGroup:], MXGroup+i)) >> 48)
						}
						require.Equal(t, want, got, "rows %d units %d per %d: row %d element %d", rows, units, per, j, i)
					}
					for i := units * MXGroup; i < bkWW; i++ {
						require.Equal(t, uint16(0xdead), w[j*bkWW+i], "row %d word %d written", j, i)
					}
				}
			}
		}
	}
}

// TestSIMDSmallBatchMXPipeline covers the overlapped MXFP4 decode at the
// token counts with a group of 4 (the decode in pieces inside the 3x4 tile)
// and without (after the tiles): one-unit rows (a piece of one unit), rows
// around the 12-row groups and the 48-row panels, a short last column
// block, NaN scales, 1 to 3 threads.
func TestSIMDSmallBatchMXPipeline(t *testing.T) {
	if CurrentLevel() < LevelAVX2 {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(43, 44))
	pools := []*Pool{nil, NewPool(2), NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, sh := range [][2]int{{1, 32}, {12, 32}, {13, 64}, {47, 288}, {48, 256}, {60, 544}, {97, 800}} {
		m := makeMats(r, sh[0], sh[1]).mx
		for g := range m.Scales {
			if g%5 == 2 {
				m.Scales[g] = 255
			}
		}
		for ti, T := range []int{3, 4, 6, 8, 9, 10, 16} {
			x := specialVec(r, T*sh[1])
			want := matMulAt(LevelPortable, nil, m, x, T)
			p := pools[ti%len(pools)]
			compare(t, fmt.Sprintf("%dx%d T=%d threads=%d", sh[0], sh[1], T, p.Threads()), matMulAt(LevelAVX2, p, m, x, T), want)
		}
	}
}

// TestBatchArgsLayout pins the offsets the batch assembly relies on (the
// T_*, D_* names of batch_avx2_amd64.s and the decode's offsets).
func TestBatchArgsLayout(t *testing.T) {
	var a tileArgs
	var st decState
	require.Equal(t, []uintptr{0, 8, 16, 24, 32, 40, 48, 56}, []uintptr{unsafe.Offsetof(a.w), unsafe.Offsetof(a.x), unsafe.Offsetof(a.xstride), unsafe.Offsetof(a.acc), unsafe.Offsetof(a.accRow), unsafe.Offsetof(a.n), unsafe.Offsetof(a.ctrl), unsafe.Offsetof(a.dec)})
	require.Equal(t, []uintptr{24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112}, []uintptr{unsafe.Offsetof(st.u), unsafe.Offsetof(st.rows), unsafe.Offsetof(st.rowSrc), unsafe.Offsetof(st.rowSc), unsafe.Offsetof(st.rowDst), unsafe.Offsetof(st.stride), unsafe.Offsetof(st.sstride), unsafe.Offsetof(st.units), unsafe.Offsetof(st.k), unsafe.Offsetof(st.tabs), unsafe.Offsetof(st.pf), unsafe.Offsetof(st.pfs)})
	require.Equal(t, uintptr(176), unsafe.Sizeof(decArgs{}))
	var d dtileArgs // D_SRC .. D_N in batch_avx2_amd64.s
	require.Equal(t, []uintptr{0, 8, 40, 48, 56, 64, 72}, []uintptr{unsafe.Offsetof(d.src), unsafe.Offsetof(d.stride), unsafe.Offsetof(d.x), unsafe.Offsetof(d.xstride), unsafe.Offsetof(d.acc), unsafe.Offsetof(d.accRow), unsafe.Offsetof(d.n)})
}
