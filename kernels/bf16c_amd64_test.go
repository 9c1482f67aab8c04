package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBF16CAVX2FileHasNoEVEX: the BF16C kernels also run at LevelAVX512, and
// on AVX2-only CPUs: no register or opmask that needs AVX-512.
func TestBF16CAVX2FileHasNoEVEX(t *testing.T) {
	src, err := os.ReadFile("bf16c_avx2_amd64.s")
	require.NoError(t, err)
	evex := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
	for i, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "//")
		assert.Empty(t, evex.FindString(code), "bf16c_avx2_amd64.s:%d: %s", i+1, strings.TrimSpace(line))
	}
}

// TestBF16CGroupArgsLayout: the offsets bf16c_avx2_amd64.s uses.
func TestBF16CGroupArgsLayout(t *testing.T) {
	var a bf16cGroupArgs
	var c bf16cArgs
	assert.Equal(t, unsafe.Offsetof(c.nib), unsafe.Offsetof(a.nib))
	assert.Equal(t, unsafe.Offsetof(c.shift), unsafe.Offsetof(a.shift))
	assert.Equal(t, unsafe.Offsetof(c.m7), unsafe.Offsetof(a.m7))
	for _, f := range []struct {
		off, want uintptr
	}{{unsafe.Offsetof(a.hdr), 96}, {unsafe.Offsetof(a.body), 192}, {unsafe.Offsetof(a.pf), 288}, {unsafe.Offsetof(a.pfh), 384},
		{unsafe.Offsetof(a.dst), 480}, {unsafe.Offsetof(a.nb), 488}, {unsafe.Offsetof(a.rows), 496}, {unsafe.Offsetof(a.used), 504}} {
		assert.Equal(t, f.want, f.off)
	}
	assert.Equal(t, 2112, bkWS*8) // the row distance fixed in decodeBF16CGroupAVX2
}

// TestDecodeBF16CGroupAVX2 compares the tile path's group decoder with the
// portable row decoder: every group size 1..bkGroup, every starting block
// and block count of patterned rows (raw blocks first, last, in the middle,
// everywhere; Inf, NaN, subnormals), the body bytes it reports, and the
// buffer rows it must leave alone.
func TestDecodeBF16CGroupAVX2(t *testing.T) {
	if !runs(LevelAVX2) {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(19, 3))
	const nfull = 9
	m, _ := bf16cPatterned(r, 2*bkGroup+1, nfull*BF16CBlock+5)
	c := CompressBF16(m)
	nbh := nfull + 1
	words := make([][]uint16, m.Rows)
	// body[i][b]: where block b of row i starts in the row
	body := make([][]int, m.Rows)
	for i := range words {
		words[i] = make([]uint16, m.Cols)
		c.DecodeRowBF16(i, words[i])
		z := c.bf16cRow(i)
		body[i] = []int{nbh}
		for b := 0; b < nfull; b++ {
			body[i] = append(body[i], body[i][b]+map[bool]int{true: 64, false: 48}[z[b] == BF16CRaw])
		}
	}
	w := make([]float64, bkGroup*bkWS)
	for rows := 1; rows <= bkGroup; rows++ {
		for r0 := 0; r0+rows <= m.Rows; r0 += 7 {
			for b0 := 0; b0 < nfull; b0++ {
				for nb := 1; b0+nb <= nfull; nb += 3 {
					a := newBF16CGroupArgs()
					for j := 0; j < rows; j++ {
						z := c.bf16cRow(r0 + j)
						a.hdr[j], a.body[j] = &z[b0], &z[body[r0+j][b0]]
						a.pf[j], a.pfh[j] = &z[0], &z[0]
					}
					for i := range w {
						w[i] = -7
					}
					a.dst, a.nb, a.rows = &w[0], nb, rows
					decodeBF16CGroupAVX2(&a)
					for j := 0; j < bkGroup; j++ {
						for e := 0; e < bkWS; e++ {
							want := -7.0
							if j < rows && e < 32*nb {
								want = float64(BF16ToF32(words[r0+j][32*b0+e]))
							}
							if math.Float64bits(want) != math.Float64bits(w[j*bkWS+e]) {
								require.Equal(t, math.Float64bits(want), math.Float64bits(w[j*bkWS+e]), "rows %d from %d, blocks %d+%d: row %d element %d", rows, r0, b0, nb, j, e)
							}
						}
						if j < rows {
							require.Equal(t, body[r0+j][b0+nb]-body[r0+j][b0], a.used[j], "row %d body bytes", r0+j)
						}
					}
				}
			}
		}
	}
}

// TestBF16CTiles drives the T > 8 path (decode a 12-row group's column
// block, then the small-batch tiles) against bf16 on the portable path:
// row counts around the 12-row groups and 48-row panels, columns with and
// without a short raw last block, one and several 256-column blocks, raw
// blocks first, last, in the middle and everywhere, Inf, NaN and
// subnormal weights, every token grouping from 9 to 17 and 33 and 64, and
// 1 to 4 threads.
func TestBF16CTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 9))
	pools := []*Pool{nil, NewPool(1), NewPool(2), NewPool(3), NewPool(4)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	shapes := [][2]int{{1, 32}, {11, 63}, {12, 256}, {13, 289}, {25, 544 + 7}, {47, 512}, {49, 1024 + 31}, {97, 800}}
	tokens := []int{9, 10, 11, 12, 13, 14, 15, 16, 17, 33, 64}
	for si, sh := range shapes {
		m, _ := bf16cPatterned(r, sh[0], sh[1])
		c := CompressBF16(m)
		for ti, T := range tokens {
			x := cancelX2(r, T, sh[1])
			if ti%3 == 2 {
				copy(x, specialVec(r, T*sh[1])[:T*sh[1]/4]) // Inf, NaN, subnormal activations too
			}
			want := matMulAt(LevelPortable, nil, m, x, T)
			for _, l := range Levels() {
				for pi, p := range pools {
					if pi > 1 && (si+ti+pi)%3 != 0 {
						continue // a third of the thread counts above one keeps the run short
					}
					compare(t, fmt.Sprintf("%v %v T=%d threads=%d", l, sh, T, p.Threads()), matMulAt(l, p, &c, x, T), want)
				}
			}
		}
	}
}
