package safetensors

import (
	"math"
	"testing"
)

// Every finite binary16 value survives F16 -> float32 -> F16, and the
// float32 equals the value computed independently from the bit fields in
// float64 arithmetic.
func TestF16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		exp := h >> 10 & 0x1f
		man := float64(h & 0x3ff)
		var want float64
		switch {
		case exp == 0x1f && man == 0:
			want = math.Inf(1)
		case exp == 0x1f:
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: %g is not NaN", h, f)
			}
			if back := Float32ToF16(f); back != uint16(h)|0x200 {
				t.Fatalf("%#04x: NaN round trip gave %#04x", h, back)
			}
			continue
		case exp == 0:
			want = man * math.Pow(2, -24)
		default:
			want = (1 + man/1024) * math.Pow(2, float64(exp-15))
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToFloat32(%#04x) = %g, want %g", h, f, want)
		}
		if back := Float32ToF16(f); back != uint16(h) {
			t.Fatalf("Float32ToF16(F16ToFloat32(%#04x)) = %#04x", h, back)
		}
	}
}

// Rounding to binary16: between every pair of adjacent non-negative finite
// halves, the exact midpoint goes to the even one and anything off the
// midpoint goes to the nearer.
func TestF16Rounding(t *testing.T) {
	for h := 0; h < 0x7bff; h++ {
		lo, hi := float64(F16ToFloat32(uint16(h))), float64(F16ToFloat32(uint16(h+1)))
		mid := float32((lo + hi) / 2) // exact: needs 12 significant bits
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		if got := Float32ToF16(mid); got != even {
			t.Fatalf("midpoint of %#04x/%#04x rounded to %#04x", h, h+1, got)
		}
		if got := Float32ToF16(math.Nextafter32(mid, 0)); got != uint16(h) {
			t.Fatalf("just below midpoint of %#04x: %#04x", h, got)
		}
		if got := Float32ToF16(math.Nextafter32(mid, float32(math.Inf(1)))); got != uint16(h+1) {
			t.Fatalf("just above midpoint of %#04x: %#04x", h, got)
		}
		if got := Float32ToF16(-mid); got != even|0x8000 {
			t.Fatalf("negative midpoint of %#04x: %#04x", h, got)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{65504, 0x7bff},
		{65519.996, 0x7bff}, // below the midpoint to 2^16
		{65520, 0x7c00},     // midpoint to 2^16 rounds to even: infinity
		{1e10, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: ties to even 0
		{math.Nextafter32(float32(math.Ldexp(1, -25)), 1), 1}, // just above it
		{1e-30, 0},
		{-1e-45, 0x8000},
	} {
		if got := Float32ToF16(c.f); got != c.want {
			t.Errorf("Float32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		bits uint32 // float32 input
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0x7f7fffff, 0x7f80}, // max float rounds to inf
		{0xff800000, 0xff80},
		{0x80000000, 0x8000},
		{0x00000001, 0x0000}, // float32 subnormal
		{0x7f800001, 0x7fc0}, // signalling NaN is quieted, stays NaN
		{0xffc00000, 0xffc0},
	} {
		if got := Float32ToBF16(math.Float32frombits(c.bits)); got != c.want {
			t.Errorf("Float32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFloat32(uint16(h))
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToFloat32(%#04x)", h)
		}
		if !math.IsNaN(float64(f)) && Float32ToBF16(f) != uint16(h) {
			t.Fatalf("bf16 round trip %#04x", h)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	src := []float32{0, -1.5, 3.140625, 65504, float32(math.Inf(1)), -2.5e-8}
	for _, dt := range []DType{F32, BF16, F16} {
		var b []byte
		switch dt {
		case F32:
			b = EncodeF32(src)
		case BF16:
			b = EncodeBF16(src)
		case F16:
			b = EncodeF16(src)
		}
		if int64(len(b)) != int64(len(src))*dt.Size() {
			t.Fatalf("%s: %d bytes", dt, len(b))
		}
		got := make([]float32, len(src))
		if err := DecodeFloat32(dt, b, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range src {
			var want float32
			switch dt {
			case F32:
				want = v
			case BF16:
				want = BF16ToFloat32(Float32ToBF16(v))
			case F16:
				want = F16ToFloat32(Float32ToF16(v))
			}
			if got[i] != want {
				t.Errorf("%s[%d] = %g, want %g", dt, i, got[i], want)
			}
		}
	}
	// Exactly representable values survive every encoding.
	if got := make([]float32, 3); DecodeFloat32(BF16, EncodeBF16([]float32{-1.5, 3.140625, 0.25}), got) != nil || got[0] != -1.5 || got[1] != 3.140625 || got[2] != 0.25 {
		t.Errorf("bf16 exact values: %v", got)
	}
	if err := DecodeFloat32(U8, []byte{1}, make([]float32, 1)); err == nil {
		t.Error("DecodeFloat32(U8) succeeded")
	}
	if err := DecodeFloat32(F32, make([]byte, 6), make([]float32, 2)); err == nil {
		t.Error("DecodeFloat32 of a partial element succeeded")
	}
	if err := DecodeFloat32(F16, make([]byte, 6), make([]float32, 2)); err == nil {
		t.Error("DecodeFloat32 into a short destination succeeded")
	}
}
