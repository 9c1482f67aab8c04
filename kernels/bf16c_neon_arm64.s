#include "textflag.h"
#include "neon_arm64.h"

// NEON BF16C kernels; bf16c_arm64.go documents what each computes. Operand
// order and the hand-encoded FCVTL: neon_arm64.h.

// BLOCKWORDS: the block of one row whose header is at h and body at b
// (both advanced) as 32 bf16 words in V20-V23 (elements 0-7, ..., 24-31).
// A raw block (header 255) branches to raw, which loads the words and
// comes back after the macro. A compressed block: e = base + offset nibble
// in byte lanes (low nibbles: elements 0-15, high: 16-31), then per 16
// elements the word's high byte sign | e>>1 (SRI into a copy of the
// sign/mantissa bytes) and low byte e<<7 | mantissa (SLI into them), zipped
// into halfwords. rt is a scratch register; V24-V29 scratch, V30 = 0x0f in
// every byte.
#define BLOCKWORDS(h, b, rt, raw) \
	MOVBU.P 1(h), rt; \
	CMP $255, rt; \
	BEQ raw; \
	VLD1.P 48(b), [V24.B16, V25.B16, V26.B16]; \
	VDUP rt, V27.B16; \
	VAND V30.B16, V24.B16, V28.B16; \
	VADD V27.B16, V28.B16, V28.B16; \
	VMOV V25.B16, V29.B16; \
	VSRI $1, V28.B16, V29.B16; \
	VSLI $7, V28.B16, V25.B16; \
	VZIP1 V29.B16, V25.B16, V20.B16; \
	VZIP2 V29.B16, V25.B16, V21.B16; \
	VUSHR $4, V24.B16, V28.B16; \
	VADD V27.B16, V28.B16, V28.B16; \
	VMOV V26.B16, V29.B16; \
	VSRI $1, V28.B16, V29.B16; \
	VSLI $7, V28.B16, V26.B16; \
	VZIP1 V29.B16, V26.B16, V22.B16; \
	VZIP2 V29.B16, V26.B16, V23.B16

// RAWWORDS: the out-of-line half of BLOCKWORDS for a raw block.
#define RAWWORDS(b, raw, back) \
raw: \
	VLD1.P 64(b), [V20.H8, V21.H8, V22.H8, V23.H8]; \
	B back

// WFMA: 8 bf16 words in w moved to the top of 32-bit lanes (ZIP with the
// zero V31), widened in V24-V29 and multiplied into lanes a0..a3 with the
// next 8 activations at R14 (advanced), loaded to V16-V19.
#define WFMA(w, a0, a1, a2, a3) \
	VLD1.P 64(R14), [V16.D2, V17.D2, V18.D2, V19.D2]; \
	ZIPH(w, V24, V25); \
	WIDEN4(24, 25, 26); \
	VFMLA V16.D2, V26.D2, a0.D2; \
	VFMLA V17.D2, V27.D2, a1.D2; \
	VFMLA V18.D2, V28.D2, a2.D2; \
	VFMLA V19.D2, V29.D2, a3.D2

// ROWBLOCK: one block of one row (header h, body b) into lanes a0..a3.
#define ROWBLOCK(h, b, raw, back, a0, a1, a2, a3) \
	BLOCKWORDS(h, b, R13, raw); \
back: \
	MOVD R2, R14; \
	WFMA(V20, a0, a1, a2, a3); \
	WFMA(V21, a0, a1, a2, a3); \
	WFMA(V22, a0, a1, a2, a3); \
	WFMA(V23, a0, a1, a2, a3)

// func bf16cRows4NEON(rows *[4]*byte, nb int, x *float64, full int, acc *[32]float64)
// Row r: header pointer R(5+r), body pointer R(9+r), lanes V(4r)..V(4r+3).
TEXT ·bf16cRows4NEON(SB), NOSPLIT, $0-40
	MOVD rows+0(FP), R0
	MOVD nb+8(FP), R1
	MOVD x+16(FP), R2
	MOVD full+24(FP), R3
	MOVD acc+32(FP), R4
	MOVD 0(R0), R5
	MOVD 8(R0), R6
	MOVD 16(R0), R7
	MOVD 24(R0), R8
	ADD R1, R5, R9
	ADD R1, R6, R10
	ADD R1, R7, R11
	ADD R1, R8, R12
	ZERO16
	VEOR V31.B16, V31.B16, V31.B16
	VMOVI $15, V30.B16
	CBZ R3, r4done

r4loop:
	ROWBLOCK(R5, R9, r4raw0, r4back0, V0, V1, V2, V3)
	ROWBLOCK(R6, R10, r4raw1, r4back1, V4, V5, V6, V7)
	ROWBLOCK(R7, R11, r4raw2, r4back2, V8, V9, V10, V11)
	ROWBLOCK(R8, R12, r4raw3, r4back3, V12, V13, V14, V15)
	ADD $256, R2
	SUBS $1, R3
	BNE r4loop

r4done:
	STORE16(R4)
	RET

	RAWWORDS(R9, r4raw0, r4back0)
	RAWWORDS(R10, r4raw1, r4back1)
	RAWWORDS(R11, r4raw2, r4back2)
	RAWWORDS(R12, r4raw3, r4back3)

// WIDEN8: 8 bf16 words in w to float64 in registers d..d+3 (ZIP with the
// zero V31 into V24, V25, then FCVTL).
#define WIDEN8(w, d) \
	ZIPH(w, V24, V25); \
	WIDEN4(24, 25, d)

// TFMA: 8 activations at R11 (advanced) in V24-V27 times the widened
// weights in registers w..w+3 into the lanes V16-V19.
#define TFMA(w0, w1, w2, w3) \
	VLD1.P 64(R11), [V24.D2, V25.D2, V26.D2, V27.D2]; \
	VFMLA V24.D2, w0.D2, V16.D2; \
	VFMLA V25.D2, w1.D2, V17.D2; \
	VFMLA V26.D2, w2.D2, V18.D2; \
	VFMLA V27.D2, w3.D2, V19.D2

// func bf16cGemmNEON(a *bf16cGemmArgs)
// The block's weights: V0-V15 (elements 2i, 2i+1 in V(i)); lanes of the
// token: V16-V19.
TEXT ·bf16cGemmNEON(SB), NOSPLIT, $0-8
	MOVD a+0(FP), R0
	MOVD 0(R0), R1  // z
	MOVD 8(R0), R2  // hdr
	MOVD 16(R0), R3 // body
	MOVD 24(R0), R4 // nr
	MOVD 32(R0), R5 // nblk
	MOVD 40(R0), R6 // x
	MOVD 48(R0), R7 // T
	MOVD 56(R0), R8 // acc
	VEOR V31.B16, V31.B16, V31.B16
	VMOVI $15, V30.B16
	CBZ R4, gdone
	CBZ R5, gdone

grow:
	MOVD (R2), R9
	ADD R1, R9, R9   // header pointer
	MOVD (R3), R10
	ADD R1, R10, R10 // body pointer
	MOVD R6, R11     // activations, walked in order
	MOVD R5, R12     // blocks left

gblock:
	BLOCKWORDS(R9, R10, R13, graw)

gback:
	WIDEN8(V20, 0)
	WIDEN8(V21, 4)
	WIDEN8(V22, 8)
	WIDEN8(V23, 12)
	MOVD R8, R14 // this row's lanes, token by token
	MOVD R7, R15 // tokens left

gtoken:
	VLD1 (R14), [V16.D2, V17.D2, V18.D2, V19.D2]
	TFMA(V0, V1, V2, V3)
	TFMA(V4, V5, V6, V7)
	TFMA(V8, V9, V10, V11)
	TFMA(V12, V13, V14, V15)
	VST1.P [V16.D2, V17.D2, V18.D2, V19.D2], 64(R14)
	SUBS $1, R15
	BNE gtoken
	SUBS $1, R12
	BNE gblock

	SUB R1, R9, R9
	MOVD.P R9, 8(R2)
	SUB R1, R10, R10
	MOVD.P R10, 8(R3)
	MOVD R14, R8 // the next row's lanes follow this row's
	SUBS $1, R4
	BNE grow

gdone:
	RET

	RAWWORDS(R10, graw, gback)
