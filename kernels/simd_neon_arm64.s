#include "textflag.h"
#include "neon_arm64.h"

// NEON kernels; simd_arm64.go documents what each computes. Lanes: a row's
// 8 contract lanes are four 2 x float64 registers (lanes 0-1, 2-3, 4-5,
// 6-7). Operand order and the hand-encoded instructions: neon_arm64.h.

// ROWS4: the row pointers rows[0..3] at R0 into R4-R7.
#define ROWS4 \
	MOVD 0(R0), R4; \
	MOVD 8(R0), R5; \
	MOVD 16(R0), R6; \
	MOVD 24(R0), R7

// ROWS4LOOP: the loop of the 4-row kernels (f32Rows4NEON, bf16Rows4NEON):
// per 8 columns the activations at R1 (advanced) in V16-V19, and ROW for
// each row pointer R4-R7 into its lanes (row r in V(4r)..V(4r+3)); R2
// columns; the lanes then stored to R3.
#define ROWS4LOOP(ROW, loop, done) \
	CBZ R2, done; \
loop: \
	VLD1.P 64(R1), [V16.D2, V17.D2, V18.D2, V19.D2]; \
	ROW(R4, V0, V1, V2, V3); \
	ROW(R5, V4, V5, V6, V7); \
	ROW(R6, V8, V9, V10, V11); \
	ROW(R7, V12, V13, V14, V15); \
	SUBS $8, R2; \
	BNE loop; \
done: \
	STORE16(R3); \
	RET

// F32ROW: 8 float32 weights at ptr (advanced) widened in V20-V25 and
// multiplied into lanes a0..a3 with the activations in V16-V19.
#define F32ROW(ptr, a0, a1, a2, a3) \
	VLD1.P 32(ptr), [V20.S4, V21.S4]; \
	WIDEN4(20, 21, 22); \
	VFMLA V16.D2, V22.D2, a0.D2; \
	VFMLA V17.D2, V23.D2, a1.D2; \
	VFMLA V18.D2, V24.D2, a2.D2; \
	VFMLA V19.D2, V25.D2, a3.D2

// func f32Rows4NEON(rows *[4]*float32, x *float64, n int, acc *[32]float64)
TEXT ·f32Rows4NEON(SB), NOSPLIT, $0-32
	MOVD rows+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	MOVD acc+24(FP), R3
	ROWS4
	ZERO16
	ROWS4LOOP(F32ROW, f32r4loop, f32r4done)

// BF16ROW: 8 bf16 weights at ptr (advanced) moved to the top of 32-bit
// lanes (ZIP with the zero V31), widened in V20-V26 and multiplied into
// lanes a0..a3 with the activations in V16-V19.
#define BF16ROW(ptr, a0, a1, a2, a3) \
	VLD1.P 16(ptr), [V20.H8]; \
	ZIPH(V20, V21, V22); \
	WIDEN4(21, 22, 23); \
	VFMLA V16.D2, V23.D2, a0.D2; \
	VFMLA V17.D2, V24.D2, a1.D2; \
	VFMLA V18.D2, V25.D2, a2.D2; \
	VFMLA V19.D2, V26.D2, a3.D2

// func bf16Rows4NEON(rows *[4]*uint16, x *float64, n int, acc *[32]float64)
TEXT ·bf16Rows4NEON(SB), NOSPLIT, $0-32
	MOVD rows+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	MOVD acc+24(FP), R3
	ROWS4
	ZERO16
	VEOR V31.B16, V31.B16, V31.B16
	ROWS4LOOP(BF16ROW, bf16r4loop, bf16r4done)

// MXDECODE: one 32-element MXFP4 group, packed bytes at pk and its scale at
// sc (both advanced), to w0..w3: the top 16 bits of the weights of elements
// 0-7, 8-15, 16-23, 24-31 as halfwords. The codes are split into nibbles
// (low = even element) and zipped into element order (E0 = elements 0-15,
// E1 = 16-31), each looked up in the scale's two 16-byte tables of
// mxTopTab (low bytes L, high bytes H; table base in R4), and L, H zipped
// into halfwords. V30 holds 0x0f in every byte; V16-V23 and R8 are scratch.
#define MXDECODE(pk, sc, w0, w1, w2, w3) \
	VLD1.P 16(pk), [V16.B16]; \
	MOVBU.P 1(sc), R8; \
	ADD R8<<5, R4, R8; \
	VLD1 (R8), [V18.B16, V19.B16]; \
	VAND V30.B16, V16.B16, V17.B16; \
	VUSHR $4, V16.B16, V16.B16; \
	VZIP1 V16.B16, V17.B16, V20.B16; \
	VZIP2 V16.B16, V17.B16, V21.B16; \
	VTBL V20.B16, [V18.B16], V16.B16; \
	VTBL V20.B16, [V19.B16], V17.B16; \
	VTBL V21.B16, [V18.B16], V22.B16; \
	VTBL V21.B16, [V19.B16], V23.B16; \
	VZIP1 V17.B16, V16.B16, w0.B16; \
	VZIP2 V17.B16, V16.B16, w1.B16; \
	VZIP1 V23.B16, V22.B16, w2.B16; \
	VZIP2 V23.B16, V22.B16, w3.B16

// MXEXPAND: 8 weights' top halfwords in w to four registers of 2 x float64
// (the halfword at the top of each 64-bit lane, the rest zero: two levels of
// ZIP with the zero V31) in V18-V21; V16, V17 scratch.
#define MXEXPAND(w) \
	ZIPH(w, V16, V17); \
	VZIP1 V16.S4, V31.S4, V18.S4; \
	VZIP2 V16.S4, V31.S4, V19.S4; \
	VZIP1 V17.S4, V31.S4, V20.S4; \
	VZIP2 V17.S4, V31.S4, V21.S4

// MXFMA: MXEXPAND(w) multiplied into lanes a0..a3 with the activations in
// V24-V27.
#define MXFMA(w, a0, a1, a2, a3) \
	MXEXPAND(w); \
	VFMLA V24.D2, V18.D2, a0.D2; \
	VFMLA V25.D2, V19.D2, a1.D2; \
	VFMLA V26.D2, V20.D2, a2.D2; \
	VFMLA V27.D2, V21.D2, a3.D2

// func mxfp4Rows2NEON(p0, p1, s0, s1 *byte, tab *[256][32]byte, x *float64, n int, acc *[16]float64)
TEXT ·mxfp4Rows2NEON(SB), NOSPLIT, $0-64
	MOVD p0+0(FP), R0
	MOVD p1+8(FP), R1
	MOVD s0+16(FP), R2
	MOVD s1+24(FP), R3
	MOVD tab+32(FP), R4
	MOVD x+40(FP), R5
	MOVD n+48(FP), R6
	MOVD acc+56(FP), R7
	ZERO4(V0, V1, V2, V3)
	ZERO4(V4, V5, V6, V7)
	VEOR V31.B16, V31.B16, V31.B16
	VMOVI $15, V30.B16
	CBZ R6, mxr2done

mxr2loop:
	MXDECODE(R0, R2, V8, V9, V10, V11)
	MXDECODE(R1, R3, V12, V13, V14, V15)
	VLD1.P 64(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	MXFMA(V8, V0, V1, V2, V3)
	MXFMA(V12, V4, V5, V6, V7)
	VLD1.P 64(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	MXFMA(V9, V0, V1, V2, V3)
	MXFMA(V13, V4, V5, V6, V7)
	VLD1.P 64(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	MXFMA(V10, V0, V1, V2, V3)
	MXFMA(V14, V4, V5, V6, V7)
	VLD1.P 64(R5), [V24.D2, V25.D2, V26.D2, V27.D2]
	MXFMA(V11, V0, V1, V2, V3)
	MXFMA(V15, V4, V5, V6, V7)
	SUBS $32, R6
	BNE mxr2loop

mxr2done:
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(R7)
	VST1 [V4.D2, V5.D2, V6.D2, V7.D2], (R7)
	RET

// func decodeF32NEON(src *float32, dst *float64, n int)
TEXT ·decodeF32NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, decf32done

decf32loop:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	WIDEN4(0, 1, 2)
	VST1.P [V2.D2, V3.D2, V4.D2, V5.D2], 64(R1)
	SUBS $8, R2
	BNE decf32loop

decf32done:
	RET

// func decodeBF16NEON(src *uint16, dst *float64, n int)
TEXT ·decodeBF16NEON(SB), NOSPLIT, $0-24
	MOVD src+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V31.B16, V31.B16, V31.B16
	CBZ R2, decbf16done

decbf16loop:
	VLD1.P 16(R0), [V0.H8]
	ZIPH(V0, V6, V7)
	WIDEN4(6, 7, 2)
	VST1.P [V2.D2, V3.D2, V4.D2, V5.D2], 64(R1)
	SUBS $8, R2
	BNE decbf16loop

decbf16done:
	RET

// func decodeMXFP4NEON(packed, scales *byte, tab *[256][32]byte, dst *float64, n int)
TEXT ·decodeMXFP4NEON(SB), NOSPLIT, $0-40
	MOVD packed+0(FP), R0
	MOVD scales+8(FP), R2
	MOVD tab+16(FP), R4
	MOVD dst+24(FP), R1
	MOVD n+32(FP), R6
	VEOR V31.B16, V31.B16, V31.B16
	VMOVI $15, V30.B16
	CBZ R6, decmxdone

decmxloop:
	MXDECODE(R0, R2, V8, V9, V10, V11)
	MXEXPAND(V8)
	VST1.P [V18.D2, V19.D2, V20.D2, V21.D2], 64(R1)
	MXEXPAND(V9)
	VST1.P [V18.D2, V19.D2, V20.D2, V21.D2], 64(R1)
	MXEXPAND(V10)
	VST1.P [V18.D2, V19.D2, V20.D2, V21.D2], 64(R1)
	MXEXPAND(V11)
	VST1.P [V18.D2, V19.D2, V20.D2, V21.D2], 64(R1)
	SUBS $32, R6
	BNE decmxloop

decmxdone:
	RET

// GEMMSTEP: lane pair q of 8 columns: one register of each weight row
// (V24-V26) and token (V27, V28), six FMAs into the tile's lanes.
#define GEMMSTEP(a00, a01, a10, a11, a20, a21) \
	VLD1.P 16(R2), [V24.D2]; \
	VLD1.P 16(R3), [V25.D2]; \
	VLD1.P 16(R4), [V26.D2]; \
	VLD1.P 16(R5), [V27.D2]; \
	VLD1.P 16(R6), [V28.D2]; \
	VFMLA V24.D2, V27.D2, a00.D2; \
	VFMLA V24.D2, V28.D2, a01.D2; \
	VFMLA V25.D2, V27.D2, a10.D2; \
	VFMLA V25.D2, V28.D2, a11.D2; \
	VFMLA V26.D2, V27.D2, a20.D2; \
	VFMLA V26.D2, V28.D2, a21.D2

// func gemm3x2NEON(a *gemmArgs, k int)
// Lanes of row r, token t: V(8r+4t) .. V(8r+4t+3).
TEXT ·gemm3x2NEON(SB), NOSPLIT, $0-16
	MOVD a+0(FP), R0
	MOVD k+8(FP), R1
	MOVD 0(R0), R2   // w[0]
	MOVD 8(R0), R3   // w[1]
	MOVD 16(R0), R4  // w[2]
	MOVD 48(R0), R5  // x[0]
	MOVD 56(R0), R6  // x[1]
	MOVD 80(R0), R7  // acc
	MOVD 88(R0), R8  // accStride (bytes)
	ADD R8, R7, R9   // row 1
	ADD R8, R9, R10  // row 2
	VLD1 (R7), [V0.D2, V1.D2, V2.D2, V3.D2]
	ADD $64, R7, R11
	VLD1 (R11), [V4.D2, V5.D2, V6.D2, V7.D2]
	VLD1 (R9), [V8.D2, V9.D2, V10.D2, V11.D2]
	ADD $64, R9, R12
	VLD1 (R12), [V12.D2, V13.D2, V14.D2, V15.D2]
	VLD1 (R10), [V16.D2, V17.D2, V18.D2, V19.D2]
	ADD $64, R10, R13
	VLD1 (R13), [V20.D2, V21.D2, V22.D2, V23.D2]
	CBZ R1, gemmdone

gemmloop:
	GEMMSTEP(V0, V4, V8, V12, V16, V20)
	GEMMSTEP(V1, V5, V9, V13, V17, V21)
	GEMMSTEP(V2, V6, V10, V14, V18, V22)
	GEMMSTEP(V3, V7, V11, V15, V19, V23)
	SUBS $8, R1
	BNE gemmloop

gemmdone:
	VST1 [V0.D2, V1.D2, V2.D2, V3.D2], (R7)
	VST1 [V4.D2, V5.D2, V6.D2, V7.D2], (R11)
	VST1 [V8.D2, V9.D2, V10.D2, V11.D2], (R9)
	VST1 [V12.D2, V13.D2, V14.D2, V15.D2], (R12)
	VST1 [V16.D2, V17.D2, V18.D2, V19.D2], (R10)
	VST1 [V20.D2, V21.D2, V22.D2, V23.D2], (R13)
	RET

// func dotF32NEON(w, x *float32, n int, acc *[8]float64)
TEXT ·dotF32NEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	MOVD acc+24(FP), R3
	ZERO4(V0, V1, V2, V3)
	CBZ R2, dotdone

dotloop:
	VLD1.P 32(R0), [V4.S4, V5.S4]
	VLD1.P 32(R1), [V6.S4, V7.S4]
	WIDEN4(4, 5, 8)
	WIDEN4(6, 7, 12)
	VFMLA V8.D2, V12.D2, V0.D2
	VFMLA V9.D2, V13.D2, V1.D2
	VFMLA V10.D2, V14.D2, V2.D2
	VFMLA V11.D2, V15.D2, V3.D2
	SUBS $8, R2
	BNE dotloop

dotdone:
	VST1 [V0.D2, V1.D2, V2.D2, V3.D2], (R3)
	RET

// TVF32: 8 float32 columns in vreg (register number n) widened in V24-V27
// and multiplied with x[i] (V16) into the column sums a0..a3.
#define TVF32(n, a0, a1, a2, a3) \
	WIDEN4(n, n+1, 24); \
	VFMLA V16.D2, V24.D2, a0.D2; \
	VFMLA V16.D2, V25.D2, a1.D2; \
	VFMLA V16.D2, V26.D2, a2.D2; \
	VFMLA V16.D2, V27.D2, a3.D2

// TVBF16: 8 bf16 columns in v (register v, number n) widened in V24-V29
// and multiplied with x[i] (V16) into the column sums a0..a3.
#define TVBF16(v, a0, a1, a2, a3) \
	ZIPH(v, V28, V29); \
	WIDEN4(28, 29, 24); \
	VFMLA V16.D2, V24.D2, a0.D2; \
	VFMLA V16.D2, V25.D2, a1.D2; \
	VFMLA V16.D2, V26.D2, a2.D2; \
	VFMLA V16.D2, V27.D2, a3.D2

// func tvecNEON(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[32]float64)
// Column sums 2c, 2c+1 in V(c).
TEXT ·tvecNEON(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R0
	MOVD stride+8(FP), R1
	MOVBU bf16+16(FP), R2
	MOVD x+24(FP), R3
	MOVD n+32(FP), R4
	MOVD out+40(FP), R5
	ZERO16
	VEOR V31.B16, V31.B16, V31.B16
	CBZ R4, tvdone
	CBNZ R2, tvbf16loop

tvf32loop:
	VLD1R.P 8(R3), [V16.D2]
	VLD1 (R0), [V20.S4, V21.S4, V22.S4, V23.S4]
	TVF32(20, V0, V1, V2, V3)
	TVF32(22, V4, V5, V6, V7)
	ADD $64, R0, R6
	VLD1 (R6), [V20.S4, V21.S4, V22.S4, V23.S4]
	TVF32(20, V8, V9, V10, V11)
	TVF32(22, V12, V13, V14, V15)
	ADD R1, R0
	SUBS $1, R4
	BNE tvf32loop
	B tvdone

tvbf16loop:
	VLD1R.P 8(R3), [V16.D2]
	VLD1 (R0), [V20.H8, V21.H8, V22.H8, V23.H8]
	TVBF16(V20, V0, V1, V2, V3)
	TVBF16(V21, V4, V5, V6, V7)
	TVBF16(V22, V8, V9, V10, V11)
	TVBF16(V23, V12, V13, V14, V15)
	ADD R1, R0
	SUBS $1, R4
	BNE tvbf16loop

tvdone:
	STORE16(R5)
	RET

// WSUM: 8 float32 in registers n, n+1 widened in V21-V24, multiplied by
// the weight in V20 and rounded (FMULD2), then added to the sums a0..a3
// (FADDD2): products rounded before the add, never fused.
#define WSUM(n, a0, a1, a2, a3) \
	WIDEN4(n, n+1, 21); \
	FMULD2(20, 21, 21); \
	FMULD2(20, 22, 22); \
	FMULD2(20, 23, 23); \
	FMULD2(20, 24, 24); \
	FADDD2(21, a0, a0); \
	FADDD2(22, a1, a1); \
	FADDD2(23, a2, a2); \
	FADDD2(24, a3, a3)

// NARROW8: the sums in registers a..a+3 rounded to 8 float32 in V16, V17.
#define NARROW8(a) \
	FCVTN(a, 16); \
	FCVTN2(a+1, 16); \
	FCVTN(a+2, 17); \
	FCVTN2(a+3, 17)

// func mixNEON(dst *float32, srcs **float32, s *float64, nsrc, n int)
// Sums of outputs 2c, 2c+1 of a block in V(c).
TEXT ·mixNEON(SB), NOSPLIT, $0-40
	MOVD dst+0(FP), R0
	MOVD srcs+8(FP), R1
	MOVD s+16(FP), R2
	MOVD nsrc+24(FP), R3
	MOVD n+32(FP), R4
	MOVD ZR, R5 // byte offset of the block

mix16:
	CMP $16, R4
	BLT mix8
	ZERO4(V0, V1, V2, V3)
	ZERO4(V4, V5, V6, V7)
	MOVD R1, R6
	MOVD R2, R7
	MOVD R3, R8

mix16src:
	MOVD.P 8(R6), R9
	ADD R5, R9, R9
	VLD1 (R9), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1R.P 8(R7), [V20.D2]
	WSUM(16, 0, 1, 2, 3)
	WSUM(18, 4, 5, 6, 7)
	SUBS $1, R8
	BNE mix16src
	NARROW8(0)
	ADD R5, R0, R9
	VST1.P [V16.S4, V17.S4], 32(R9)
	NARROW8(4)
	VST1 [V16.S4, V17.S4], (R9)
	ADD $64, R5
	SUB $16, R4
	B mix16

mix8:
	CBZ R4, mixdone
	ZERO4(V0, V1, V2, V3)
	MOVD R1, R6
	MOVD R2, R7
	MOVD R3, R8

mix8src:
	MOVD.P 8(R6), R9
	ADD R5, R9, R9
	VLD1 (R9), [V16.S4, V17.S4]
	VLD1R.P 8(R7), [V20.D2]
	WSUM(16, 0, 1, 2, 3)
	SUBS $1, R8
	BNE mix8src
	NARROW8(0)
	ADD R5, R0, R9
	VST1 [V16.S4, V17.S4], (R9)

mixdone:
	RET

// func wrowsNEON(dst *float32, p *float64, rows *float32, stride, n, m int)
TEXT ·wrowsNEON(SB), NOSPLIT, $0-48
	MOVD dst+0(FP), R0
	MOVD p+8(FP), R1
	MOVD rows+16(FP), R2
	MOVD stride+24(FP), R3
	MOVD n+32(FP), R4
	MOVD m+40(FP), R5
	LSL $2, R3 // stride in bytes

wr16:
	CMP $16, R5
	BLT wr8
	ZERO4(V0, V1, V2, V3)
	ZERO4(V4, V5, V6, V7)
	MOVD R1, R6
	MOVD R2, R7
	MOVD R4, R8
	CBZ R8, wr16out

wr16row:
	VLD1R.P 8(R6), [V20.D2]
	VLD1 (R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD R3, R7
	WSUM(16, 0, 1, 2, 3)
	WSUM(18, 4, 5, 6, 7)
	SUBS $1, R8
	BNE wr16row

wr16out:
	NARROW8(0)
	VST1.P [V16.S4, V17.S4], 32(R0)
	NARROW8(4)
	VST1.P [V16.S4, V17.S4], 32(R0)
	ADD $64, R2
	SUB $16, R5
	B wr16

wr8:
	CBZ R5, wrdone
	ZERO4(V0, V1, V2, V3)
	MOVD R1, R6
	MOVD R2, R7
	MOVD R4, R8
	CBZ R8, wr8out

wr8row:
	VLD1R.P 8(R6), [V20.D2]
	VLD1 (R7), [V16.S4, V17.S4]
	ADD R3, R7
	WSUM(16, 0, 1, 2, 3)
	SUBS $1, R8
	BNE wr8row

wr8out:
	NARROW8(0)
	VST1 [V16.S4, V17.S4], (R0)

wrdone:
	RET
