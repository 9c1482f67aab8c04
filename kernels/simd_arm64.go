package kernels

import "unsafe"

// Assembly kernels for arm64 Advanced SIMD (simd_neon_arm64.s). As in
// simd_amd64.go, the doc comment of each declaration states as a Go loop
// exactly what the routine computes; the tests compare LevelNEON with the
// portable path bit for bit. A pointer argument is indexed like a slice that
// starts where it points, and the caller guarantees that every element
// indexed exists.
//
// The dot-product kernels keep the 8 contract lanes of doc.go in four
// 2 x float64 registers per row (lanes 0-1, 2-3, 4-5, 6-7): element i goes
// to lane i%8, each lane starts at +0 and accumulates in ascending i, and
// the routine stores the raw lanes; the Go caller adds the tail and combines
// them (finishRow, DotF64). Weights are widened exactly (FCVTL; bf16 by a
// 16-bit shift first) and the activations arrive widened, so every product
// is exact and FMLA equals the portable multiply-then-add. Go's assembler
// has no FCVTL, FCVTN, or vector FMUL and FADD on doubles: the file encodes
// them with WORD. FPCR keeps its defaults under Go (round to nearest, no
// flush-to-zero), so subnormals are widened and rounded as in Go code.

// f32Rows4NEON is the float32 row kernel, 4 rows in flight, the 8 lanes of
// row r stored at acc[r*8:r*8+8] (acc is written, not read):
//
//	for r := 0; r < 4; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			acc[r*8+i%8] += float64(rows[r][i]) * x[i]
//		}
//	}
//
// n is a multiple of 8 and x[i] = float64(a[i]) of the float32 activations a.
//
//go:noescape
func f32Rows4NEON(rows *[4]*float32, x *float64, n int, acc *[32]float64)

// bf16Rows4NEON is the bf16 row kernel, 4 rows in flight (acc is written,
// not read). The 16-bit shift widens every bf16 value exactly, Inf and NaN
// included, so no block needs the portable path:
//
//	for r := 0; r < 4; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			acc[r*8+i%8] += float64(BF16ToF32(rows[r][i])) * x[i]
//		}
//	}
//
// n is a multiple of 8 and x[i] = float64(a[i]).
//
//go:noescape
func bf16Rows4NEON(rows *[4]*uint16, x *float64, n int, acc *[32]float64)

// mxfp4Rows2NEON is the MXFP4 row kernel, rows 0 and 1 of one block in
// flight (acc is written, not read):
//
//	for r := 0; r < 2; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			s := scales[r][i/32]
//			c := packed[r][i/2] >> (4 * (i % 2)) & 15
//			acc[r*8+i%8] += mxTable[s][c] * x[i]
//		}
//	}
//
// with packed = {p0, p1}, scales = {s0, s1}, and mxTable[s][c] read as
// float64frombits(uint64(tab[s][c]) | uint64(tab[s][16+c])<<8) << 48), the
// value of mxTopTab. n is a multiple of 32 and x[i] = float64(a[i]). Row 255
// of the table is zero, so a NaN-scale group adds zero products where
// DotMXFP4 skips it: the same lanes for finite activations only (simdMatMul
// sends non-finite activations to the portable path).
//
//go:noescape
func mxfp4Rows2NEON(p0, p1, s0, s1 *byte, tab *[256][32]byte, x *float64, n int, acc *[16]float64)

// decodeF32NEON widens float32 weights for the gemm micro-kernel, n a
// multiple of 8:
//
//	for i := 0; i < n; i++ {
//		dst[i] = float64(src[i])
//	}
//
//go:noescape
func decodeF32NEON(src *float32, dst *float64, n int)

// decodeBF16NEON widens bf16 weights exactly for the gemm micro-kernel, n a
// multiple of 8:
//
//	for i := 0; i < n; i++ {
//		dst[i] = float64(BF16ToF32(src[i]))
//	}
//
//go:noescape
func decodeBF16NEON(src *uint16, dst *float64, n int)

// decodeMXFP4NEON decodes one MXFP4 row for the gemm micro-kernel through
// mxTopTab (tab); n is a multiple of 32:
//
//	for i := 0; i < n; i++ {
//		s := scales[i/32]
//		c := packed[i/2] >> (4 * (i % 2)) & 15
//		dst[i] = mxTable[s][c]
//	}
//
// except that a NaN-scale group (s = 255) decodes to zeros (zero products
// for finite activations).
//
//go:noescape
func decodeMXFP4NEON(packed, scales *byte, tab *[256][32]byte, dst *float64, n int)

// gemm3x2NEON is the mat-mat micro-kernel: weight rows a.w[0..2] times
// tokens a.x[0..1], 24 registers of lanes over one column block, added to
// the lanes in memory (a.acc is read and written):
//
//	for r := 0; r < 3; r++ {
//		for t := 0; t < 2; t++ {
//			lanes := a.acc[r*a.accStride/8+t*8:][:8]
//			for i := 0; i < k; i++ {
//				lanes[i%8] += a.w[r][i] * a.x[t][i]
//			}
//		}
//	}
//
// k is a multiple of 8; gemmPanelNEON runs each 6-row tile as two halves and
// calls it for the column blocks in ascending order.
//
//go:noescape
func gemm3x2NEON(a *gemmArgs, k int)

// dotF32NEON stores the 8 contract lanes of a float32 dot product (acc is
// written, not read):
//
//	*acc = [8]float64{}
//	for i := 0; i < n; i++ {
//		acc[i%8] += float64(w[i]) * float64(x[i])
//	}
//
// n is a multiple of 8.
//
//go:noescape
func dotF32NEON(w, x *float32, n int, acc *[8]float64)

// tvecNEON is one 32-column block of MatTVec: row i of the block starts
// stride bytes after row i-1, at w for i = 0, and holds float32 values, or
// bfloat16 if bf16; each output has one accumulator summed over i in order:
//
//	for c := 0; c < 32; c++ {
//		sum := 0.0
//		for i := 0; i < n; i++ {
//			row := unsafe.Add(w, i*stride)
//			var v float64
//			if bf16 {
//				v = float64(BF16ToF32((*[32]uint16)(row)[c]))
//			} else {
//				v = float64((*[32]float32)(row)[c])
//			}
//			sum += x[i] * v
//		}
//		out[c] = sum
//	}
//
// n >= 0 and x[i] is the float64 of a float32 activation (exact products,
// so the FMA equals MatTVec's multiply-then-add).
//
//go:noescape
func tvecNEON(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[32]float64)

// mixNEON is the weighted sum of AttnRes over the nsrc >= 1 sources at srcs
// (an array of nsrc pointers), n a multiple of 8:
//
//	for i := 0; i < n; i++ {
//		acc := 0.0
//		for j := 0; j < nsrc; j++ {
//			acc += float64(s[j] * float64(srcs[j][i])) // rounded, never fused
//		}
//		dst[i] = float32(acc)
//	}
//
// The product is an FMUL and the sum an FADD (no FMLA), the rounding to
// float32 an FCVTN: round to nearest even, as Go's conversion.
//
//go:noescape
func mixNEON(dst *float32, srcs **float32, s *float64, nsrc, n int)

// wrowsNEON is the weighted row sum of WeightedRows for the first m outputs,
// m a multiple of 8, over n >= 0 rows; row s starts stride float32 elements
// (stride >= 0) after row s-1:
//
//	for j := 0; j < m; j++ {
//		acc := 0.0
//		for s := 0; s < n; s++ {
//			acc += float64(p[s] * float64(rows[s*stride+j])) // rounded, never fused
//		}
//		dst[j] = float32(acc)
//	}
//
// Blocks of 16 outputs keep eight accumulators while they walk the rows, a
// remaining 8 go as one block; each output's sum runs over s in order.
//
//go:noescape
func wrowsNEON(dst *float32, p *float64, rows *float32, stride, n, m int)
