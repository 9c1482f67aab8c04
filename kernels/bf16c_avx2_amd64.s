#include "textflag.h"
#include "avx2_amd64.h"

// The BF16C kernels (AVX2 + FMA). bf16c_amd64.go declares each routine and
// states, as a Go loop, what it computes; bf16c.go defines the format.
//
// A block of 32 weights is rebuilt to bf16 words in 16-bit lanes, in two
// registers: Wa (Y10) holds elements 0-7 in its low 128 bits and 16-23 in
// its high ones, Wb (Y11) elements 8-15 and 24-31. For a compressed block
// (header = base exponent b, body = 16 offset bytes O, then 32
// sign<<7|mantissa bytes S):
//
//	E = ((O, O>>4 in the two halves) & 0x0f) + b  byte j = exponent of element j
//	H = (S & 0x80) | (E>>1 & 0x7f)                the word's high byte
//	L = (E<<7 & 0x80) | (S & 0x7f)                its low byte
//	Wa, Wb = the bytes L, H interleaved (VPUNPCKLBW, VPUNPCKHBW)
//
// (the byte addition wraps, as DotBF16C's does). A raw block (header 255)
// loads its words into the same layout. Each word then moves to the top of
// a 32-bit lane (VPUNPCKLWD/HWD with zero: the float32 of the bf16 value,
// exact for every value) and VCVTPS2PD widens four at a time, exactly, to
// the float64 the FMA multiplies. The lanes 0-3 of a row's contract lanes
// take elements 0-3, 8-11, 16-19, 24-27 in that order, lanes 4-7 elements
// 4-7, ..., 28-31: ascending, as the contract asks.
//
// Registers: Y0-Y7 accumulators, Y8-Y13 scratch, Y14 = 0x7f in every byte,
// Y15 = 0. BX is the block index (headers are indexed by it), CX the
// number of blocks, AX the argument block (bf16cArgs, offsets below).

#define A_NIB 0
#define A_SHV 32
#define A_M7 64
#define A_ROWS 96
#define A_BODY 128
#define A_X 160
#define A_NB 192
#define A_ACC 200

// DECODE rebuilds block BX of a row (headers at hdr, body at body) into
// Wa, Wb and advances body; a raw block branches to raw, whose code (RAW,
// placed after the routine's RET) comes back to back.
#define DECODE(hdr, body, raw, back) \
	CMPB (hdr)(BX*1), $255 \
	JEQ  raw \
	VBROADCASTI128 (body), Y8 \
	VPSRLVD A_SHV(AX), Y8, Y8 \
	VPAND A_NIB(AX), Y8, Y8 \
	VPBROADCASTB (hdr)(BX*1), Y9 \
	VPADDB Y9, Y8, Y8 \
	VMOVDQU 16(body), Y9 \
	VPSRLW $1, Y8, Y10 \
	VPAND Y14, Y10, Y10 \
	VPANDN Y9, Y14, Y11 \
	VPOR Y11, Y10, Y10 \
	VPSLLW $7, Y8, Y8 \
	VPANDN Y8, Y14, Y8 \
	VPAND Y14, Y9, Y9 \
	VPOR Y9, Y8, Y8 \
	VPUNPCKHBW Y10, Y8, Y11 \
	VPUNPCKLBW Y10, Y8, Y10 \
	ADDQ $48, body \
back:

#define RAW(body, raw, back) \
raw: \
	VMOVDQU (body), X10 \
	VINSERTI128 $1, 32(body), Y10, Y10 \
	VMOVDQU 16(body), X11 \
	VINSERTI128 $1, 48(body), Y11, Y11 \
	ADDQ $64, body \
	JMP  back

// WIDEN widens Wa, Wb to float64 four elements at a time, in the order of
// the contract, and hands each register to F with its offset (bytes) in
// the block's float64 activations and the accumulators it feeds: L0-L3
// (lanes 0-3 of up to four tokens) for elements 0-3, 8-11, 16-19, 24-27 and
// H0-H3 (lanes 4-7) for the others.
#define WIDEN(F, L0, L1, L2, L3, H0, H1, H2, H3) \
	VPUNPCKLWD Y10, Y15, Y12 \
	VPUNPCKLWD Y11, Y15, Y13 \
	VCVTPS2PD X12, Y8 \
	F(Y8, 0, L0, L1, L2, L3) \
	VCVTPS2PD X13, Y9 \
	F(Y9, 64, L0, L1, L2, L3) \
	VEXTRACTI128 $1, Y12, X12 \
	VCVTPS2PD X12, Y8 \
	F(Y8, 128, L0, L1, L2, L3) \
	VEXTRACTI128 $1, Y13, X13 \
	VCVTPS2PD X13, Y9 \
	F(Y9, 192, L0, L1, L2, L3) \
	VPUNPCKHWD Y10, Y15, Y12 \
	VPUNPCKHWD Y11, Y15, Y13 \
	VCVTPS2PD X12, Y8 \
	F(Y8, 32, H0, H1, H2, H3) \
	VCVTPS2PD X13, Y9 \
	F(Y9, 96, H0, H1, H2, H3) \
	VEXTRACTI128 $1, Y12, X12 \
	VCVTPS2PD X12, Y8 \
	F(Y8, 160, H0, H1, H2, H3) \
	VEXTRACTI128 $1, Y13, X13 \
	VCVTPS2PD X13, Y9 \
	F(Y9, 224, H0, H1, H2, H3)

// The F of WIDEN: one token at R14 (advanced per block); two tokens at
// R14, R15 and four at R12-R15 (column offset R8); a store to R14.
#define FMA1(w, off, a, b, c, d) \
	VFMADD231PD off(R14), w, a

#define FMA2(w, off, a, b, c, d) \
	VFMADD231PD off(R14)(R8*1), w, a \
	VFMADD231PD off(R15)(R8*1), w, b

#define FMA4(w, off, a, b, c, d) \
	VFMADD231PD off(R12)(R8*1), w, a \
	VFMADD231PD off(R13)(R8*1), w, b \
	VFMADD231PD off(R14)(R8*1), w, c \
	VFMADD231PD off(R15)(R8*1), w, d

#define STORE(w, off, a, b, c, d) \
	VMOVUPD w, off(R14)

#define SETUP \
	MOVQ a+0(FP), AX \
	MOVQ A_NB(AX), CX \
	VMOVDQU A_M7(AX), Y14 \
	VPXOR Y15, Y15, Y15 \
	XORQ BX, BX

#define STOREACC \
	MOVQ A_ACC(AX), DX \
	STOREACC8(DX)

// func bf16cRows4x1AVX2(a *bf16cArgs)
// 4 rows (headers SI, DI, R8, R9; bodies R10-R13), one token (R14); row j's
// lanes 0-3 in Y(2j), 4-7 in Y(2j+1).
TEXT ·bf16cRows4x1AVX2(SB), NOSPLIT, $0-8
	SETUP
	MOVQ A_ROWS+0(AX), SI
	MOVQ A_ROWS+8(AX), DI
	MOVQ A_ROWS+16(AX), R8
	MOVQ A_ROWS+24(AX), R9
	MOVQ A_BODY+0(AX), R10
	MOVQ A_BODY+8(AX), R11
	MOVQ A_BODY+16(AX), R12
	MOVQ A_BODY+24(AX), R13
	MOVQ A_X+0(AX), R14
	ZEROACC8
	TESTQ CX, CX
	JEQ  r41done
r41loop:
	PREFETCHT0 PFD(R10)
	PREFETCHT0 PFD(R11)
	PREFETCHT0 PFD(R12)
	PREFETCHT0 PFD(R13)
	DECODE(SI, R10, r41raw0, r41back0)
	WIDEN(FMA1, Y0, Y0, Y0, Y0, Y1, Y1, Y1, Y1)
	DECODE(DI, R11, r41raw1, r41back1)
	WIDEN(FMA1, Y2, Y2, Y2, Y2, Y3, Y3, Y3, Y3)
	DECODE(R8, R12, r41raw2, r41back2)
	WIDEN(FMA1, Y4, Y4, Y4, Y4, Y5, Y5, Y5, Y5)
	DECODE(R9, R13, r41raw3, r41back3)
	WIDEN(FMA1, Y6, Y6, Y6, Y6, Y7, Y7, Y7, Y7)
	ADDQ $256, R14
	INCQ BX
	CMPQ BX, CX
	JLT  r41loop
r41done:
	STOREACC
	VZEROUPPER
	RET
	RAW(R10, r41raw0, r41back0)
	RAW(R11, r41raw1, r41back1)
	RAW(R12, r41raw2, r41back2)
	RAW(R13, r41raw3, r41back3)

// func bf16cRows2x2AVX2(a *bf16cArgs)
// 2 rows (headers SI, DI; bodies R10, R11), two tokens (R14, R15, column
// offset R8); row j, token t's lanes 0-3 in Y(4j+2t), 4-7 in Y(4j+2t+1).
TEXT ·bf16cRows2x2AVX2(SB), NOSPLIT, $0-8
	SETUP
	MOVQ A_ROWS+0(AX), SI
	MOVQ A_ROWS+8(AX), DI
	MOVQ A_BODY+0(AX), R10
	MOVQ A_BODY+8(AX), R11
	MOVQ A_X+0(AX), R14
	MOVQ A_X+8(AX), R15
	XORQ R8, R8
	ZEROACC8
	TESTQ CX, CX
	JEQ  r22done
r22loop:
	PREFETCHT0 PFD(R10)
	PREFETCHT0 PFD(R11)
	DECODE(SI, R10, r22raw0, r22back0)
	WIDEN(FMA2, Y0, Y2, Y0, Y0, Y1, Y3, Y1, Y1)
	DECODE(DI, R11, r22raw1, r22back1)
	WIDEN(FMA2, Y4, Y6, Y4, Y4, Y5, Y7, Y5, Y5)
	ADDQ $256, R8
	INCQ BX
	CMPQ BX, CX
	JLT  r22loop
r22done:
	STOREACC
	VZEROUPPER
	RET
	RAW(R10, r22raw0, r22back0)
	RAW(R11, r22raw1, r22back1)

// func bf16cRows1x4AVX2(a *bf16cArgs)
// 1 row (header SI, body R10), four tokens (R12-R15, column offset R8);
// token t's lanes 0-3 in Y(2t), 4-7 in Y(2t+1).
TEXT ·bf16cRows1x4AVX2(SB), NOSPLIT, $0-8
	SETUP
	MOVQ A_ROWS+0(AX), SI
	MOVQ A_BODY+0(AX), R10
	MOVQ A_X+0(AX), R12
	MOVQ A_X+8(AX), R13
	MOVQ A_X+16(AX), R14
	MOVQ A_X+24(AX), R15
	XORQ R8, R8
	ZEROACC8
	TESTQ CX, CX
	JEQ  r14done
r14loop:
	PREFETCHT0 PFD(R10)
	DECODE(SI, R10, r14raw, r14back)
	WIDEN(FMA4, Y0, Y2, Y4, Y6, Y1, Y3, Y5, Y7)
	ADDQ $256, R8
	INCQ BX
	CMPQ BX, CX
	JLT  r14loop
r14done:
	STOREACC
	VZEROUPPER
	RET
	RAW(R10, r14raw, r14back)

#define G_HDR 96
#define G_BODY 192
#define G_PF 288
#define G_PFH 384
#define G_DST 480
#define G_NB 488
#define G_ROWS 496
#define G_USED 504

// func decodeBF16CGroupAVX2(a *bf16cGroupArgs)
// Row r < a.rows: header SI, body R10 (from a.body[r]; its advance is stored
// to a.used[r]), output R14 (a.dst + 2112*r); while it decodes row r it prefetches a line of
// a.pf[r] per block (R11) and the line at a.pfh[r].
TEXT ·decodeBF16CGroupAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	VMOVDQU A_M7(AX), Y14
	VPXOR Y15, Y15, Y15
	MOVQ G_DST(AX), R13
	MOVQ G_NB(AX), CX
	XORQ DX, DX
gdrow:
	MOVQ G_HDR(AX)(DX*8), SI
	MOVQ G_BODY(AX)(DX*8), R10
	MOVQ G_PF(AX)(DX*8), R11
	MOVQ G_PFH(AX)(DX*8), R12
	PREFETCHT0 (R12)
	MOVQ R13, R14
	XORQ BX, BX
gdloop:
	PREFETCHT0 (R11)
	ADDQ $64, R11
	DECODE(SI, R10, gdraw, gdback)
	WIDEN(STORE, Y0, Y0, Y0, Y0, Y0, Y0, Y0, Y0)
	ADDQ $256, R14
	INCQ BX
	CMPQ BX, CX
	JLT  gdloop
	SUBQ G_BODY(AX)(DX*8), R10
	MOVQ R10, G_USED(AX)(DX*8)
	ADDQ $2112, R13
	INCQ DX
	CMPQ DX, G_ROWS(AX)
	JLT  gdrow
	VZEROUPPER
	RET
	RAW(R10, gdraw, gdback)
