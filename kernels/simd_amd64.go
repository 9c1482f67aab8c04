package kernels

import "unsafe"

// Assembly kernels (simd_avx512_amd64.s, simd_avx2_amd64.s). Every kernel
// accumulates the 8 contract lanes of each output in ascending element order
// and stores the raw lanes; Go code adds any tail and combines them.

// bf16Rows8AVX512 accumulates 8 bf16 rows (row pointers in rows) against the
// float64 activations x over n elements (n a multiple of 8) into acc[r*8+lane].
//
//go:noescape
func bf16Rows8AVX512(rows *[8]*uint16, x *float64, n int, acc *[64]float64) (finite bool)

// readAVX512 reads n bytes (a multiple of 512) at p and returns a value that
// depends on every byte, so the loads cannot be elided.
//
//go:noescape
func readAVX512(p *byte, n int) uint64

// mxArgs is the argument block of the MXFP4 kernels; the assembly relies
// on the offsets noted.
type mxArgs struct {
	packed [8]*byte          // 0
	scales [8]*byte          // 64
	pow2   *[256]float64     // 128: 2^(s-127), 0 for s = 255
	e2m1   *[16]float64      // 136
	shifts [8]uint64         // 144: 0, 4, ..., 28
	pow2h  *[256]float64     // 208: 2^(s-128), 0 for s = 255
	lut    [16]int8          // 216: 2*E2M1 as integers
	tab    *[256][16]float64 // 232: mxTable (E2M1 * 2^(s-127), row 255 zero)
	pf     *byte             // 240: packed bytes to prefetch (the next 8 rows)
	pfs    *byte             // 248: scales to prefetch (the next 8 rows)
}

// mxfp4Rows8AVX512 accumulates 8 MXFP4 rows over n elements (a multiple of 32).
//
//go:noescape
func mxfp4Rows8AVX512(a *mxArgs, x *float64, n int, acc *[64]float64)

//go:noescape
func f32Rows8AVX512(rows *[8]*float32, x *float64, n int, acc *[64]float64)

//go:noescape
func decodeF32AVX512(src *float32, dst *float64, n int)

//go:noescape
func decodeBF16AVX512(src *uint16, dst *float64, n int)

//go:noescape
func decodeMXFP4AVX512(a *mxArgs, dst *float64, n int)

// gemmArgs is the argument block of the gemm micro-kernels.
type gemmArgs struct {
	w         [6]*float64
	x         [4]*float64
	acc       *float64
	accStride int
}

//go:noescape
func gemm6x4AVX512(a *gemmArgs, k int)

//go:noescape
func dotF32AVX512(w, x *float32, n int, acc *[8]float64)

//go:noescape
func tvecAVX512(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[64]float64)

//go:noescape
func f32Rows4AVX2(rows *[4]*float32, x *float64, n int, acc *[32]float64)

//go:noescape
func bf16Rows4AVX2(rows *[4]*uint16, x *float64, n int, acc *[32]float64)

//go:noescape
func decodeF32AVX2(src *float32, dst *float64, n int)

//go:noescape
func decodeBF16AVX2(src *uint16, dst *float64, n int)

//go:noescape
func decodeMXFP4AVX2(a *mxArgs, dst *float64, n int)

//go:noescape
func gemm3x2AVX2(a *gemmArgs, k int)

//go:noescape
func dotF32AVX2(w, x *float32, n int, acc *[8]float64)

//go:noescape
func tvecAVX2(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[32]float64)

//go:noescape
func mixAVX512(dst *float32, srcs **float32, s *float64, nsrc, n int)

//go:noescape
func mixAVX2(dst *float32, srcs **float32, s *float64, nsrc, n int)

// wrowsAVX512 writes dst[j] = float32(Σ_{s<n} p[s]·rows[s*stride+j]) for
// j < m (a multiple of 8); products rounded before each add.
//
//go:noescape
func wrowsAVX512(dst *float32, p *float64, rows *float32, stride, n, m int)

// wrowsAVX2 is wrowsAVX512 for m a multiple of 4.
//
//go:noescape
func wrowsAVX2(dst *float32, p *float64, rows *float32, stride, n, m int)
