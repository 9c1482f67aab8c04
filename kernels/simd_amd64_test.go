package kernels

import (
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"unsafe"
)

// TestMXTableAligned checks the kernels' aligned copy of mxTable.
func TestMXTableAligned(t *testing.T) {
	if uintptr(unsafe.Pointer(mxTab))%64 != 0 {
		t.Fatalf("mxTab at %p is not 64-byte aligned", mxTab)
	}
	for s := range mxTable {
		for c := range mxTable[s] {
			if math.Float64bits(mxTab[s][c]) != math.Float64bits(mxTable[s][c]) {
				t.Fatalf("mxTab[%d][%d] = %v, mxTable %v", s, c, mxTab[s][c], mxTable[s][c])
			}
		}
	}
}

// TestAVX2FileHasNoEVEX keeps the AVX2 kernels runnable on AVX2-only CPUs:
// registers X16-X31/Y16-Y31, any Z register or an opmask need AVX-512, and on
// this (AVX-512) machine such an instruction would pass every other test.
func TestAVX2FileHasNoEVEX(t *testing.T) {
	src, err := os.ReadFile("simd_avx2_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	evex := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
	for i, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "//")
		if m := evex.FindString(code); m != "" {
			t.Errorf("simd_avx2_amd64.s:%d uses %s: %s", i+1, m, strings.TrimSpace(line))
		}
	}
}
