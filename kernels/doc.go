// Package kernels holds k3's numeric kernels: mat-vec and mat-mat for f32,
// bf16 and MXFP4 weights, norms and activations, and a deterministic
// parallel pool. It imports nothing of the project.
//
// # Floating-point contract
//
// Activations are float32. Every dot product y = Σ w_i·x_i is formed in
// float64 in a fixed, lane-partitioned order so that the portable Go code,
// any SIMD path and any thread count give bit-identical results:
//
//   - There are 8 logical float64 lanes. Element i goes to lane i mod 8, and
//     each lane accumulates its elements in ascending i, starting from +0:
//     lane[l] = lane[l] + float64(w_i)*float64(x_i).
//   - Every weight value (f32, bf16 widened by a 16-bit shift, or an MXFP4
//     E2M1 code times its E8M0 scale 2^(s-127)) times a float32 activation is
//     exact in float64 (at most 48 significant bits), so a fused multiply-add
//     and a multiply-then-add agree bit for bit: SIMD code may use FMA freely.
//   - The lanes are combined by a fixed tree:
//     ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)),
//     which is what one 512-bit register (or two 256-bit ones added lane-wise)
//     reduces to by halving. The result is rounded once to float32.
//   - Because the lanes start at +0 and round-to-nearest never produces -0 from
//     a sum that is not exactly -0+-0, padding a tail with zero products never
//     changes a lane: tails need no special order.
//   - An MXFP4 group whose E8M0 scale is 255 (NaN by the OCP Microscaling
//     specification) contributes nothing: its elements are read as zeros,
//     not NaN, so such a group cannot by itself make a dot product NaN.
//     Callers count such groups when they load an expert (CountNaNScales).
//
// # SIMD paths
//
// On amd64 the hot loops run in Go assembly (simd_avx512_amd64.s,
// simd_avx2_amd64.s), chosen at start-up from the CPU features
// (golang.org/x/sys/cpu): LevelAVX512, LevelAVX2 (+FMA) or LevelPortable.
// Setting K3_PORTABLE=1 forces the portable Go code; SetLevel switches at run
// time (tests force each level and compare bit for bit with the portable
// path). On arm64 the same loops run in NEON (Advanced SIMD) assembly,
// simd_neon_arm64.s, as LevelNEON (see below); other architectures use the
// portable code. The assembly follows the
// contract exactly: one zmm (or two ymm) holds the 8 lanes, each lane is
// accumulated in ascending element order, and Go code adds the < 8 tail
// columns and combines the lanes with the same tree. NaN results may differ
// from the portable path in their payload bits only. Instruction sequences
// the kernels repeat are #define macros (shared ones in avx2_amd64.h and
// neon_arm64.h); each expands to exactly the instructions it lists.
//
//   - AVX-512, T <= 8: fused row kernels, 8 rows in flight with software
//     prefetch (within each row and of the next block of rows); for T > 1
//     each block of rows is multiplied with every token in turn while its
//     weights are in L1/L2 (one mat-vec per token, so the contract order is
//     the T = 1 one). bf16 is decoded with integer operations to w*2^-896
//     and the activations are pre-scaled by 2^896 (products stay exact);
//     blocks holding a bf16 Inf/NaN weight are redone on the portable path.
//     MXFP4 loads each row's scaled E2M1 table E2M1*2^(s-127) per group
//     (mxTable; all zero for s = 255), moves each element's nibble to the low
//     bits of its qword (one 8-byte broadcast, VPSRLVQ) and looks it up with
//     VPERMI2PD; the FMA then forms the exact product with the activation.
//   - AVX-512, T > 8 (mat-mat): panels of 48 output rows; each 6-row block
//     of 512 columns is decoded once to float64 and multiplied with all
//     tokens by a 6x4 register-tiled micro-kernel whose lane accumulators
//     persist in memory between column blocks.
//   - AVX2, T = 1: the f32 and bf16 row kernels, 4 rows in flight.
//   - AVX2, T >= 2, and MXFP4 at every T (batch_amd64.go): panels of 48
//     output rows in column blocks of 256; each group of 12 rows of a block
//     is decoded once to float64 (bf16 with integer operations to w*2^-896
//     against activations pre-scaled by 2^896, rows with an Inf/NaN weight
//     decoded again exactly) while the next block is prefetched, and
//     multiplied with the tokens 4 (or 3, 2, 1) at a time by register tiles
//     of 3x4 (4x3, 6x2, 12x1) rows x tokens that walk each half of the 8
//     lanes in turn, so 12 lane accumulators cover twice the rows x tokens.
//     MXFP4 is decoded to 16-bit words instead, the top 16 bits of
//     E2M1*2^(s-127) (the only bits its float64 has), by two VPSHUFB
//     lookups in per-scale byte tables, in an even/odd lane order (lanes
//     0,2,4,6 then 1,3,5,7, with the activations and lane accumulators in
//     the same order); the tiles build each 4 weights as float64 in a
//     register (an 8-byte broadcast and one VPSHUFB), and the 3x4 tile
//     decodes the next group into a second buffer in pieces between its
//     row tiles, so the decode overlaps the FMAs. Each weight is decoded
//     once per call whatever T is. bf16 with T <= 8 skips the buffer: the
//     tiles widen the weights from the matrix themselves, once per group of
//     tokens (exactly, by a 16-bit shift and VCVTPS2PD), which costs less
//     than storing and reloading them up to T = 8.
//     The lane accumulators persist in memory between column blocks, which
//     add to them in ascending column order.
//   - Attention over a cache of float32 rows (MLA): MatVec64 runs the
//     scores through the f32 row kernels (8 rows in flight, so eight
//     independent lane sets instead of one dependent chain), and
//     WeightedRows keeps eight vector accumulators of outputs while it walks
//     the rows (each output still sums over the rows in order, products
//     rounded before the add) instead of one scalar sum per output.
//   - MXFP4 kernels give a NaN-scale group zero products instead of skipping
//     it, which is the same for finite activations; with a non-finite
//     activation the call runs on the portable path.
//
// BF16C (the lossless compressed bf16 of bf16c.go) has AVX2 + FMA kernels
// only (bf16c_avx2_amd64.s), which LevelAVX512 uses too: AVX-512 forms are
// not written, since no machine this is developed on can run them. The
// kernels read the compressed rows directly: each 32-weight block is
// rebuilt to bf16 words in 16-bit lanes in registers (base exponent plus
// 4-bit offsets, with the sign and mantissa bytes; a raw block is loaded as
// words) and widened exactly by a 16-bit shift and VCVTPS2PD as the bf16
// kernels do, so every value, Inf, NaN and subnormals included, gives the
// bf16 product and no block falls back. T <= 8 runs on row kernels over
// blocks of 4 rows: four tokens at a time share each decoded block (one row,
// 4 tokens), two left over use 2 rows x 2 tokens, one uses 4 rows x 1 token;
// the rows stay in L1/L2 between token groups. T > 8 runs the small-batch
// tiles of batch_amd64.go: each 12-row group's 256-column block is decoded
// once, exactly, to float64 (decodeBF16CGroupAVX2) and multiplied with all
// the tokens by tile3x4/4x3/6x2/12x1. The short last block of a row (cols mod 32
// weights, always raw) is added in Go before the lanes are combined.
//
// On arm64 (LevelNEON) the 8 lanes of a row are four 2 x float64 registers
// and the blocking is the AVX-512 path's with the rows the 32 vector
// registers hold: row kernels with 4 f32 or bf16 rows (bf16 widened by a 16-bit shift,
// exact for every value, so no block falls back) or 2 MXFP4 rows in flight
// for T <= 8, decode and a 3x2 micro-kernel above. An MXFP4 weight
// E2M1*2^(s-127) has only its top 16 bits set as a float64, so the kernels
// look each code's two top bytes up in a per-scale table with TBL and move
// them to the top of a 64-bit lane with ZIP (mxTopTab); the FMA then forms
// the exact product, as on amd64.
//
// BF16C on arm64 (bf16c_neon_arm64.s) is read straight from the compressed
// rows: each full 32-weight block is rebuilt in registers to its 32 bf16
// words (a compressed block in byte lanes: exponent = base + offset nibble,
// high byte sign | e>>1 by SRI, low byte e<<7 | mantissa by SLI, zipped to
// halfwords; a raw block loaded as words) and widened as the bf16 path does,
// so no block falls back and Inf, NaN and subnormal weights give the
// portable products. T <= 8 runs a row kernel with 4 rows in flight (the
// row's blocks decoded again for each token); T > 8 decodes each block of a
// row once into 16 registers of float64 and multiplies it with every token,
// each token's 8 lanes loaded and stored around it, over runs of blocks
// whose widened activations (about 16 KiB) stay in L1. Go adds the short
// last block (cols mod 32 weights, always raw) and combines the lanes; rows
// of fewer than 32 columns run on the portable path.
//
// Parallel kernels split OUTPUT rows among workers and never split a
// reduction, so results do not depend on the number of threads.
//
// Elementwise float32 arithmetic outside dot products is written with explicit
// float32 conversions around every product (float32(a*b) + c), which the Go
// specification forbids the compiler to fuse. Transcendental functions are
// evaluated in float64 with the math package and rounded once to float32.
package kernels
