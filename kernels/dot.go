package kernels

import "math"

// Lanes is the number of float64 accumulation lanes in the dot contract.
const Lanes = 8

// combine reduces the 8 lanes by the contract's fixed tree.
func combine(a *[Lanes]float64) float64 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// BF16ToF32 widens a bfloat16 bit pattern exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToBF16 rounds a float32 to bfloat16, to nearest even (NaN stays NaN).
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// DotF32 is the contract dot product of float32 weights and activations.
func DotF32(w, x []float32) float32 { return float32(DotF64(w, x)) }

// DotF64 is DotF32 without the final rounding (used where a caller needs the
// float64 sum, e.g. sums of squares).
func DotF64(w, x []float32) float64 {
	var a [Lanes]float64
	n := len(x)
	w = w[:n]
	i := simdDotF32(w, x, &a) // a multiple of 8 elements, or 0
	for ; i+Lanes <= n; i += Lanes {
		for l := 0; l < Lanes; l++ {
			a[l] += float64(w[i+l]) * float64(x[i+l])
		}
	}
	for l := 0; i < n; i, l = i+1, l+1 {
		a[l] += float64(w[i]) * float64(x[i])
	}
	return combine(&a)
}

// DotBF16 is the contract dot product of bfloat16 weights and float32 activations.
func DotBF16(w []uint16, x []float32) float32 {
	var a [Lanes]float64
	n := len(x)
	w = w[:n]
	i := 0
	for ; i+Lanes <= n; i += Lanes {
		for l := 0; l < Lanes; l++ {
			a[l] += float64(math.Float32frombits(uint32(w[i+l])<<16)) * float64(x[i+l])
		}
	}
	for l := 0; i < n; i, l = i+1, l+1 {
		a[l] += float64(math.Float32frombits(uint32(w[i])<<16)) * float64(x[i])
	}
	return float32(combine(&a))
}
