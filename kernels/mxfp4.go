package kernels

import (
	"bytes"
	"math"
)

// E2M1 holds the 16 FP4 (E2M1) code values; bit 3 is the sign.
var E2M1 = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0 /* -0, set in init */, -0.5, -1, -1.5, -2, -3, -4, -6}

// MXGroup is the number of elements that share one E8M0 scale.
const MXGroup = 32

// mxTable[s][c] = E2M1[c] * 2^(s-127); row 255 is all zero (NaN scale -> 0).
var mxTable [256][16]float64

func init() {
	E2M1[8] = math.Copysign(0, -1)
	for s := 0; s < 255; s++ {
		for c := 0; c < 16; c++ {
			mxTable[s][c] = E2M1[c] * math.Ldexp(1, s-127)
		}
	}
}

// MXFP4Value returns the exact value of element i of an MXFP4 row
// (packed: cols/2 bytes, low nibble = even element; scales: cols/32 bytes).
func MXFP4Value(packed, scales []byte, i int) float64 {
	b := packed[i>>1]
	c := b & 15
	if i&1 == 1 {
		c = b >> 4
	}
	return mxTable[scales[i/MXGroup]][c]
}

// CountNaNScales counts E8M0 scale bytes equal to 255, which the kernels
// treat as zero groups.
func CountNaNScales(scales []byte) int {
	// bytes.Count of one byte is vectorised, and this runs for every expert
	// read (about 1 MB of scales per K3 expert): BenchmarkCountNaNScales,
	// docs/BENCHMARKS.md
	return bytes.Count(scales, nan255)
}

var nan255 = []byte{255}

// DotMXFP4 is the contract dot product of one MXFP4 row with float32
// activations. len(x) must be a multiple of 32; groups with scale 255 are skipped.
func DotMXFP4(packed, scales []byte, x []float32) float32 {
	var a [Lanes]float64
	n := len(x)
	for g := 0; g*MXGroup < n; g++ {
		s := scales[g]
		if s == 255 {
			continue
		}
		t := &mxTable[s]
		p := packed[g*MXGroup/2 : g*MXGroup/2+MXGroup/2]
		xg := x[g*MXGroup : g*MXGroup+MXGroup]
		for j := 0; j < MXGroup/2; j += Lanes / 2 {
			// bytes j..j+3 hold elements 2j..2j+7 = one pass over the 8 lanes
			for k := 0; k < Lanes/2; k++ {
				b := p[j+k]
				a[2*k] += t[b&15] * float64(xg[2*(j+k)])
				a[2*k+1] += t[b>>4] * float64(xg[2*(j+k)+1])
			}
		}
	}
	return float32(combine(&a))
}
