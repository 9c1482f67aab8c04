package kernels

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

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

// TestDecodeBF16CAVX2 compares the gemm path's block decoder with the
// portable row decoder for every full block of patterned rows, from every
// starting block, and checks the body bytes it reports.
func TestDecodeBF16CAVX2(t *testing.T) {
	if !runs(LevelAVX2) {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(19, 3))
	m, _ := bf16cPatterned(r, 12, 7*BF16CBlock+5)
	c := CompressBF16(m)
	nbh := 8
	words := make([]uint16, m.Cols)
	for i := 0; i < m.Rows; i++ {
		z := c.bf16cRow(i)
		c.DecodeRowBF16(i, words)
		body := nbh
		for b0 := 0; b0 < 7; b0++ {
			a := newBF16CArgs()
			a.rows[0], a.body[0], a.nb = &z[b0], &z[body], 7-b0
			dst := make([]float64, 32*a.nb)
			used := decodeBF16CAVX2(&a, &dst[0])
			want := 0
			for b := b0; b < 7; b++ {
				want += map[bool]int{true: 64, false: 48}[z[b] == BF16CRaw]
			}
			require.Equal(t, want, used, "row %d from block %d", i, b0)
			for j, v := range dst {
				require.Equal(t, math.Float64bits(float64(BF16ToF32(words[b0*32+j]))), math.Float64bits(v), "row %d element %d", i, b0*32+j)
			}
			body += map[bool]int{true: 64, false: 48}[z[b0] == BF16CRaw]
		}
	}
}
