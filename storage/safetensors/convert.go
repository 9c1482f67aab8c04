package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact: the bits
// become the high half of the float32).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16ToFloat32 converts an IEEE 754 binary16 bit pattern to float32 exactly,
// including subnormals, infinities and NaNs (the NaN payload is kept).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: man * 2^-24, exact in float32.
		return math.Float32frombits(sign | math.Float32bits(float32(man)*(1.0/(1<<24))))
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// Float32ToBF16 rounds f to bfloat16, round-to-nearest-even. NaNs stay NaN
// (quieted); values beyond the bfloat16 range become infinities.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Float32ToF16 rounds f to IEEE binary16, round-to-nearest-even, producing
// subnormals, signed zeros and infinities as needed. NaNs stay NaN.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 112 // binary16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if exp == 0 {
			return sign // float32 subnormals are far below half the smallest f16 subnormal
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		if shift > 24 {
			return sign
		}
		q := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | uint16(q)
	}
	q := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && q&1 == 1 {
		q++ // may carry into the exponent, up to infinity: both correct
	}
	return sign | uint16(q)
}

// DecodeFloat32 converts little-endian elements of dtype dt (F32, BF16 or
// F16) from src into dst. len(src) must be a multiple of the element size and
// dst must hold at least len(src)/dt.Size() values. Conversion is exact.
func DecodeFloat32(dt DType, src []byte, dst []float32) error {
	sz := dt.Size()
	if dt == U8 || sz == 0 {
		return fmt.Errorf("safetensors: cannot decode %s as float32", dtName(dt))
	}
	if int64(len(src))%sz != 0 {
		return fmt.Errorf("safetensors: %d bytes is not a whole number of %s elements", len(src), dt)
	}
	n := len(src) / int(sz)
	if len(dst) < n {
		return fmt.Errorf("safetensors: destination holds %d values, need %d", len(dst), n)
	}
	dst = dst[:n]
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

func dtName(dt DType) string {
	if dt == "" {
		return "empty dtype"
	}
	return string(dt)
}

// EncodeF32 returns src as little-endian F32 bytes.
func EncodeF32(src []float32) []byte {
	out := make([]byte, 4*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// EncodeBF16 returns src rounded to bfloat16 (round-to-nearest-even) as
// little-endian bytes.
func EncodeBF16(src []float32) []byte {
	out := make([]byte, 2*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16(v))
	}
	return out
}

// EncodeF16 returns src rounded to IEEE binary16 (round-to-nearest-even) as
// little-endian bytes.
func EncodeF16(src []float32) []byte {
	out := make([]byte, 2*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint16(out[2*i:], Float32ToF16(v))
	}
	return out
}
