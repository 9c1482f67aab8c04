package kernels

import "unsafe"

// Assembly kernels (simd_avx512_amd64.s, simd_avx2_amd64.s). The doc comment
// of each declaration states, as a Go loop, exactly what the routine
// computes; the portable Go code of this package is the reference those
// loops follow, and the tests compare every level with it bit for bit. In
// the loops a pointer argument is indexed like a slice that starts where it
// points (x[i] is the i-th float64 from x, rows[r][i] the i-th element from
// rows[r]), and the caller guarantees that every element indexed exists.
//
// The dot-product kernels keep the 8 contract lanes of doc.go: element i of
// a row goes to lane i%8, each lane starts at +0 and accumulates in
// ascending i, and the routine stores the raw lanes. The Go caller
// (finishRow, DotF64) adds the fewer than 8 tail elements into lanes 0, 1,
// ... and combines the lanes by the fixed tree of combine,
// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)). Each product is exact in
// float64, so the fused multiply-adds of the assembly give the same lanes as
// the multiply-then-add of the loops. Lengths are element counts; none of
// the routines needs aligned arguments (all loads and stores are unaligned),
// only the multiples stated.

// bf16Rows8AVX512 is the AVX-512 bf16 row kernel: 8 rows in flight, the 8
// lanes of row r stored at acc[r*8:r*8+8] (acc is written, not read). It
// decodes each weight exactly with integer operations to w·2^-896, and x
// holds the activations pre-scaled by 2^896 (x[i] = float64(a[i])·0x1p896,
// prepared by matVecSIMD), so each product is the float64(w)·float64(a[i])
// of the portable path:
//
//	for r := 0; r < 8; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			w := float64(BF16ToF32(rows[r][i])) * 0x1p-896 // exact, subnormals too
//			acc[r*8+i%8] += w * x[i]
//		}
//	}
//	finite = no rows[r][i] (r < 8, i < n) is Inf or NaN (exponent 255)
//
// n is a multiple of 8. An Inf or NaN weight decodes to a finite value, so
// when finite is false the lanes are meaningless and the caller recomputes
// the block on the portable path. The kernel prefetches the first 1 KiB of
// the 8 rows that follow rows[7] at the distance rows[1]-rows[0], the layout
// of a Mat; a prefetch never faults, so other layouts are only slower.
//
//go:noescape
func bf16Rows8AVX512(rows *[8]*uint16, x *float64, n int, acc *[64]float64) (finite bool)

// readAVX512 returns the XOR of the n/8 little-endian uint64 words at p, the
// value readGo returns, so the loads cannot be elided:
//
//	var h uint64
//	for i := 0; i < n; i += 8 {
//		h ^= binary.LittleEndian.Uint64(p[i:])
//	}
//	return h
//
// n is a positive multiple of 512. The bytes are read as 8 concurrent
// streams, one per eighth, prefetched at the distance of the row kernels:
// the access pattern of a mat-vec with 8 rows in flight.
//
//go:noescape
func readAVX512(p *byte, n int) uint64

// mxArgs is the argument block of the MXFP4 kernels; the assembly relies
// on the offsets noted. packed[r] and scales[r] are row r's nibbles (low
// nibble = even element) and E8M0 scales; the decode kernels use row 0 only.
type mxArgs struct {
	packed [8]*byte          // 0
	scales [8]*byte          // 64
	pow2   *[256]float64     // 128: 2^(s-127), 0 for s = 255
	e2m1   *[16]float64      // 136
	shifts [8]uint64         // 144: 0, 4, ..., 28
	_      [24]byte          // 208: unused
	tab    *[256][16]float64 // 232: mxTable (E2M1 * 2^(s-127), row 255 zero)
	pf     *byte             // 240: packed bytes to prefetch (the next 8 rows)
	pfs    *byte             // 248: scales to prefetch (the next 8 rows)
}

// mxfp4Rows8AVX512 is the AVX-512 MXFP4 row kernel: 8 rows in flight, the
// 8 lanes of row r stored at acc[r*8:r*8+8] (acc is written, not read). It
// reads a.packed, a.scales, a.shifts and a.tab (mxTab, the 64-byte-aligned
// copy of mxTable):
//
//	for r := 0; r < 8; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			s := a.scales[r][i/32]
//			c := a.packed[r][i/2] >> (4 * (i % 2)) & 15
//			acc[r*8+i%8] += a.tab[s][c] * x[i]
//		}
//	}
//
// n is the whole row, a multiple of 32 (n/2 packed bytes and n/32 scales
// per row), and x[i] = float64(a[i]) of the activations a. Row 255 of the
// table is zero, so a group with the NaN scale 255 adds zero products where
// DotMXFP4 skips it: the same lanes for finite activations only, which is
// why simdMatMul sends non-finite activations to the portable path. a.pf and
// a.pfs point at the packed bytes and the scales of the next 8 rows
// (contiguous after this block in a Mat), prefetched while this block is
// consumed; they affect speed only.
//
//go:noescape
func mxfp4Rows8AVX512(a *mxArgs, x *float64, n int, acc *[64]float64)

// f32Rows8AVX512 is the AVX-512 float32 row kernel: 8 rows in flight, the 8
// lanes of row r stored at acc[r*8:r*8+8] (acc is written, not read):
//
//	for r := 0; r < 8; r++ {
//		for l := 0; l < 8; l++ {
//			acc[r*8+l] = 0
//		}
//		for i := 0; i < n; i++ {
//			acc[r*8+i%8] += float64(rows[r][i]) * x[i]
//		}
//	}
//
// n is a multiple of 8 and x[i] = float64(a[i]) of the float32 activations a
// (widened once per call by matVecSIMD and simdMatVec64).
//
//go:noescape
func f32Rows8AVX512(rows *[8]*float32, x *float64, n int, acc *[64]float64)

// decodeF32AVX512 widens float32 weights for the gemm micro-kernels, n a
// multiple of 8:
//
//	for i := 0; i < n; i++ {
//		dst[i] = float64(src[i])
//	}
//
//go:noescape
func decodeF32AVX512(src *float32, dst *float64, n int)

// decodeBF16AVX512 widens bf16 weights exactly for the gemm micro-kernels,
// n a multiple of 8:
//
//	for i := 0; i < n; i++ {
//		dst[i] = float64(BF16ToF32(src[i]))
//	}
//
//go:noescape
func decodeBF16AVX512(src *uint16, dst *float64, n int)

// decodeMXFP4AVX512 decodes one MXFP4 row (a.packed[0], a.scales[0]) for the
// gemm micro-kernels, using a.e2m1, a.pow2 and a.shifts; n is a multiple of
// 32:
//
//	for i := 0; i < n; i++ {
//		s := a.scales[0][i/32]
//		c := a.packed[0][i/2] >> (4 * (i % 2)) & 15
//		dst[i] = a.e2m1[c] * a.pow2[s]
//	}
//
// which is mxTable[s][c] exactly; pow2[255] = 0, so a group with the NaN
// scale decodes to zeros (zero products for finite activations).
//
//go:noescape
func decodeMXFP4AVX512(a *mxArgs, dst *float64, n int)

// gemm6x4AVX512 is the AVX-512 mat-mat micro-kernel: 6 weight rows times 4
// tokens, 24 lane sets held in registers over one column block and added
// to the lanes in memory (a.acc is read and written):
//
//	for r := 0; r < 6; r++ {
//		for t := 0; t < 4; t++ {
//			lanes := a.acc[r*a.accStride/8+t*8:][:8]
//			for i := 0; i < k; i++ {
//				lanes[i%8] += a.w[r][i] * a.x[t][i]
//			}
//		}
//	}
//
// k is a multiple of 8. gemmPanel clears the lanes, calls the kernel for the
// column blocks of a panel in ascending order (each block starts at a
// multiple of 8, so element j of a row lands in lane j%8 in ascending j
// across the calls) and combines the lanes with finishRow after the last.
// The products are exact: weights decoded exactly, activations widened from
// float32.
//
//go:noescape
func gemm6x4AVX512(a *gemmArgs, k int)

// dotF32AVX512 stores the 8 contract lanes of a float32 dot product (acc is
// written, not read):
//
//	*acc = [8]float64{}
//	for i := 0; i < n; i++ {
//		acc[i%8] += float64(w[i]) * float64(x[i])
//	}
//
// n is a multiple of 8; DotF64 adds the tail into lanes 0, 1, ... and
// combines the lanes.
//
//go:noescape
func dotF32AVX512(w, x *float32, n int, acc *[8]float64)

// tvecAVX512 is one 64-column block of MatTVec. Row i of the block starts
// stride bytes after row i-1, at w for i = 0, and holds float32 values, or
// bfloat16 if bf16. Each output has one accumulator summed over i in order
// (MatTVec's order, not the lane contract):
//
//	for c := 0; c < 64; c++ {
//		sum := 0.0
//		for i := 0; i < n; i++ {
//			row := unsafe.Add(w, i*stride)
//			var v float64
//			if bf16 {
//				v = float64(BF16ToF32((*[64]uint16)(row)[c]))
//			} else {
//				v = float64((*[64]float32)(row)[c])
//			}
//			sum += x[i] * v
//		}
//		out[c] = sum
//	}
//
// n >= 0, and x[i] is the float64 of a float32 activation, so each product
// is exact and the FMA equals MatTVec's multiply-then-add. simdTVec
// bounds-checks the block's last element and rounds out to float32.
//
//go:noescape
func tvecAVX512(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[64]float64)

// f32Rows4AVX2 is the AVX2 float32 row kernel: f32Rows8AVX512 for 4 rows,
// the 8 lanes of row r stored at acc[r*8:r*8+8] (acc is written, not read):
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
func f32Rows4AVX2(rows *[4]*float32, x *float64, n int, acc *[32]float64)

// bf16Rows4AVX2 is the AVX2 bf16 row kernel, 4 rows in flight, the 8 lanes
// of row r stored at acc[r*8:r*8+8] (acc is written, not read). It widens
// the weights by a 16-bit shift (exact for every value, Inf and NaN
// included), so x holds the plain widened activations, x[i] = float64(a[i]):
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
// n is a multiple of 8.
//
//go:noescape
func bf16Rows4AVX2(rows *[4]*uint16, x *float64, n int, acc *[32]float64)

// decodeF32AVX2 is decodeF32AVX512 on AVX2, n a multiple of 8:
//
//	for i := 0; i < n; i++ {
//		dst[i] = float64(src[i])
//	}
//
//go:noescape
func decodeF32AVX2(src *float32, dst *float64, n int)

// dotF32AVX2 is dotF32AVX512 on AVX2 (acc is written, not read):
//
//	*acc = [8]float64{}
//	for i := 0; i < n; i++ {
//		acc[i%8] += float64(w[i]) * float64(x[i])
//	}
//
// n is a multiple of 8.
//
//go:noescape
func dotF32AVX2(w, x *float32, n int, acc *[8]float64)

// tvecAVX2 is tvecAVX512 for a block of 32 columns: the same loop with
// c < 32, row i at unsafe.Add(w, i*stride), one accumulator per output
// summed over i in order, n >= 0.
//
//go:noescape
func tvecAVX2(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[32]float64)

// mixAVX512 is the weighted sum of AttnRes over the nsrc sources at srcs
// (an array of nsrc pointers), n a multiple of 8 and nsrc >= 1 (the loop
// over the sources runs at least once):
//
//	for i := 0; i < n; i++ {
//		acc := 0.0
//		for j := 0; j < nsrc; j++ {
//			acc += float64(s[j] * float64(srcs[j][i])) // rounded, never fused
//		}
//		dst[i] = float32(acc)
//	}
//
//go:noescape
func mixAVX512(dst *float32, srcs **float32, s *float64, nsrc, n int)

// mixAVX2 is mixAVX512 for n a multiple of 4 (nsrc >= 1).
//
//go:noescape
func mixAVX2(dst *float32, srcs **float32, s *float64, nsrc, n int)

// wrowsAVX512 is the weighted row sum of WeightedRows for the first m
// outputs, m a multiple of 8, over n >= 0 rows; row s starts stride float32
// elements (not bytes; stride >= 0, see checkStride) after row s-1:
//
//	for j := 0; j < m; j++ {
//		acc := 0.0
//		for s := 0; s < n; s++ {
//			acc += float64(p[s] * float64(rows[s*stride+j])) // rounded, never fused
//		}
//		dst[j] = float32(acc)
//	}
//
// Blocks of 64 outputs keep eight accumulators while they walk the rows, the
// remainder goes 8 at a time; each output's sum runs over s in order either
// way.
//
//go:noescape
func wrowsAVX512(dst *float32, p *float64, rows *float32, stride, n, m int)

// wrowsAVX2 is wrowsAVX512 for m a multiple of 4 (blocks of 32 outputs,
// then 4 at a time).
//
//go:noescape
func wrowsAVX2(dst *float32, p *float64, rows *float32, stride, n, m int)
