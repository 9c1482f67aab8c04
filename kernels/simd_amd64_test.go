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
// an AVX-512 machine such an instruction would pass every other test.
func TestAVX2FileHasNoEVEX(t *testing.T) {
	evex := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
	for _, file := range []string{"simd_avx2_amd64.s", "batch_avx2_amd64.s", "bf16c_avx2_amd64.s", "peak_avx2_amd64.s", "avx2_amd64.h"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			code, _, _ := strings.Cut(line, "//")
			if m := evex.FindString(code); m != "" {
				t.Errorf("%s:%d uses %s: %s", file, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// TestMXArgsLayout pins the offsets the AVX-512 MXFP4 kernels read.
func TestMXArgsLayout(t *testing.T) {
	var a mxArgs
	for _, c := range []struct {
		name string
		got  uintptr
		want uintptr
	}{{"scales", unsafe.Offsetof(a.scales), 64}, {"pow2", unsafe.Offsetof(a.pow2), 128}, {"e2m1", unsafe.Offsetof(a.e2m1), 136},
		{"shifts", unsafe.Offsetof(a.shifts), 144}, {"tab", unsafe.Offsetof(a.tab), 232}, {"pf", unsafe.Offsetof(a.pf), 240}, {"pfs", unsafe.Offsetof(a.pfs), 248}} {
		if c.got != c.want {
			t.Errorf("mxArgs.%s at %d, the assembly reads %d", c.name, c.got, c.want)
		}
	}
}
