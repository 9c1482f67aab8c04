package kernels

import (
	"math"
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
