#include "textflag.h"
#include "avx2_amd64.h"

// Each routine's header gives its Go signature, its preconditions and its
// register layout; the Go declaration in simd_amd64.go states what it
// computes as a Go loop.

// The 4-row kernels: row pointers rows[0..3] at (AX) into SI, DI, R8, R9;
// the lane accumulators Y0-Y7 (lanes 0-3 of row r in Y(2r), 4-7 in Y(2r+1))
// cleared (ZEROACC8) and stored to acc (STOREACC8(AX)).
#define LOADPTRS4 \
	MOVQ 0(AX), SI \
	MOVQ 8(AX), DI \
	MOVQ 16(AX), R8 \
	MOVQ 24(AX), R9

// PF4 prefetches the four rows PFD bytes ahead of their offset BX.
#define PF4 \
	PREFETCHT0 PFD(SI)(BX*1) \
	PREFETCHT0 PFD(DI)(BX*1) \
	PREFETCHT0 PFD(R8)(BX*1) \
	PREFETCHT0 PFD(R9)(BX*1)

// F32FMA widens the 4 float32 weights at m to t and adds t*x to acc;
// BF16FMA does the same for 4 bf16 weights, widened exactly by a 16-bit
// shift (tx is t's X register).
#define F32FMA(m, t, x, acc) \
	VCVTPS2PD m, t \
	VFMADD231PD t, x, acc

#define BF16FMA(m, tx, t, x, acc) \
	BF16PD(m, tx, t) \
	VFMADD231PD t, x, acc

// func f32Rows4AVX2(rows *[4]*float32, x *float64, n int, acc *[32]float64)
// 4 rows in flight, n a multiple of 8; lanes 0-3 of row r in Y(2r), lanes
// 4-7 in Y(2r+1), stored to acc[r*8:].
TEXT ·f32Rows4AVX2(SB), NOSPLIT, $0-32
	MOVQ rows+0(FP), AX
	LOADPTRS4
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	ZEROACC8
	XORQ BX, BX
	JMP  f32cond
f32loop:
	PF4
	VMOVUPD 0(DX)(BX*2), Y8
	VMOVUPD 32(DX)(BX*2), Y9
	F32FMA(0(SI)(BX*1), Y10, Y8, Y0)
	F32FMA(16(SI)(BX*1), Y11, Y9, Y1)
	F32FMA(0(DI)(BX*1), Y12, Y8, Y2)
	F32FMA(16(DI)(BX*1), Y13, Y9, Y3)
	F32FMA(0(R8)(BX*1), Y14, Y8, Y4)
	F32FMA(16(R8)(BX*1), Y15, Y9, Y5)
	F32FMA(0(R9)(BX*1), Y10, Y8, Y6)
	F32FMA(16(R9)(BX*1), Y11, Y9, Y7)
	ADDQ $32, BX
f32cond:
	CMPQ BX, CX
	JLT  f32loop
	MOVQ acc+24(FP), AX
	STOREACC8(AX)
	VZEROUPPER
	RET

// func bf16Rows4AVX2(rows *[4]*uint16, x *float64, n int, acc *[32]float64)
// 4 rows in flight, n a multiple of 8, each weight widened exactly by a
// 16-bit shift; lanes 0-3 of row r in Y(2r), lanes 4-7 in Y(2r+1), stored to
// acc[r*8:].
TEXT ·bf16Rows4AVX2(SB), NOSPLIT, $0-32
	MOVQ rows+0(FP), AX
	LOADPTRS4
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	SHLQ $1, CX
	ZEROACC8
	XORQ BX, BX
	JMP  bf16cond
bf16loop:
	PF4
	VMOVUPD 0(DX)(BX*4), Y8
	VMOVUPD 32(DX)(BX*4), Y9
	BF16FMA(0(SI)(BX*1), X10, Y10, Y8, Y0)
	BF16FMA(8(SI)(BX*1), X11, Y11, Y9, Y1)
	BF16FMA(0(DI)(BX*1), X12, Y12, Y8, Y2)
	BF16FMA(8(DI)(BX*1), X13, Y13, Y9, Y3)
	BF16FMA(0(R8)(BX*1), X14, Y14, Y8, Y4)
	BF16FMA(8(R8)(BX*1), X15, Y15, Y9, Y5)
	BF16FMA(0(R9)(BX*1), X10, Y10, Y8, Y6)
	BF16FMA(8(R9)(BX*1), X11, Y11, Y9, Y7)
	ADDQ $16, BX
bf16cond:
	CMPQ BX, CX
	JLT  bf16loop
	MOVQ acc+24(FP), AX
	STOREACC8(AX)
	VZEROUPPER
	RET

// func decodeF32AVX2(src *float32, dst *float64, n int)
// dst[i] = float64(src[i]) for i < n (n a multiple of 8).
TEXT ·decodeF32AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	JMP  df32cond
df32loop:
	VCVTPS2PD 0(SI)(BX*1), Y0
	VCVTPS2PD 16(SI)(BX*1), Y1
	VMOVUPD Y0, 0(DI)(BX*2)
	VMOVUPD Y1, 32(DI)(BX*2)
	ADDQ $32, BX
df32cond:
	CMPQ BX, CX
	JLT  df32loop
	VZEROUPPER
	RET

// func dotF32AVX2(w, x *float32, n int, acc *[8]float64)
// acc = the 8 contract lanes of Σ w[i]*x[i] over n elements (n a multiple of
// 8): lanes 0-3 in Y0, 4-7 in Y1.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	JMP  dotcond
dotloop:
	VCVTPS2PD 0(SI)(BX*1), Y2
	VCVTPS2PD 16(SI)(BX*1), Y3
	VCVTPS2PD 0(DI)(BX*1), Y4
	VCVTPS2PD 16(DI)(BX*1), Y5
	VFMADD231PD Y2, Y4, Y0
	VFMADD231PD Y3, Y5, Y1
	ADDQ $32, BX
dotcond:
	CMPQ BX, CX
	JLT  dotloop
	MOVQ acc+24(FP), AX
	VMOVUPD Y0, 0(AX)
	VMOVUPD Y1, 32(AX)
	VZEROUPPER
	RET

// func tvecAVX2(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[32]float64)
// tvecAVX512 for 32 columns (stride in bytes); columns 4j..4j+3 in Y(j).
TEXT ·tvecAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), DX
	MOVQ x+24(FP), DI
	MOVQ n+32(FP), CX
	ZEROACC8
	TESTQ CX, CX
	JEQ  tvdone
	CMPB bf16+16(FP), $0
	JNE  tvbf
tvf32:
	VBROADCASTSD 0(DI), Y8
	F32FMA(0(SI), Y9, Y8, Y0)
	F32FMA(16(SI), Y10, Y8, Y1)
	F32FMA(32(SI), Y11, Y8, Y2)
	F32FMA(48(SI), Y12, Y8, Y3)
	F32FMA(64(SI), Y13, Y8, Y4)
	F32FMA(80(SI), Y14, Y8, Y5)
	F32FMA(96(SI), Y9, Y8, Y6)
	F32FMA(112(SI), Y10, Y8, Y7)
	ADDQ DX, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  tvf32
	JMP  tvdone
tvbf:
	VBROADCASTSD 0(DI), Y8
	BF16FMA(0(SI), X9, Y9, Y8, Y0)
	BF16FMA(8(SI), X10, Y10, Y8, Y1)
	BF16FMA(16(SI), X11, Y11, Y8, Y2)
	BF16FMA(24(SI), X12, Y12, Y8, Y3)
	BF16FMA(32(SI), X13, Y13, Y8, Y4)
	BF16FMA(40(SI), X14, Y14, Y8, Y5)
	BF16FMA(48(SI), X9, Y9, Y8, Y6)
	BF16FMA(56(SI), X10, Y10, Y8, Y7)
	ADDQ DX, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  tvbf
tvdone:
	MOVQ out+40(FP), AX
	STOREACC8(AX)
	VZEROUPPER
	RET


// func mixAVX2(dst *float32, srcs **float32, s *float64, nsrc, n int)
// dst[i] = float32(Σ_j s[j]*float64(srcs[j][i])), j ascending from +0, each
// product rounded before the add (no FMA), for i < n (n a multiple of 4);
// nsrc >= 1: the loop over the sources runs at least once.
TEXT ·mixAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ srcs+8(FP), SI
	MOVQ s+16(FP), DX
	MOVQ nsrc+24(FP), R8
	MOVQ n+32(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	JMP  mixcond
mixouter:
	VXORPD Y0, Y0, Y0
	XORQ R9, R9
mixinner:
	MOVQ (SI)(R9*8), R10
	VCVTPS2PD (R10)(BX*1), Y1
	VBROADCASTSD (DX)(R9*8), Y2
	VMULPD Y2, Y1, Y1
	VADDPD Y1, Y0, Y0
	INCQ R9
	CMPQ R9, R8
	JLT  mixinner
	VCVTPD2PSY Y0, X0
	VMOVUPS X0, (DI)(BX*1)
	ADDQ $16, BX
mixcond:
	CMPQ BX, CX
	JLT  mixouter
	VZEROUPPER
	RET


// One row of WeightedRows for one register of outputs: widen the float32
// values at off(R11), multiply by the row's weight (Y8), add.
#define WRSTEP(off, t, acc) \
	VCVTPS2PD off(R11), t \
	VMULPD Y8, t, t \
	VADDPD t, acc, acc

// WRSTORE rounds the 4 outputs in acc (X register x) to float32 and stores
// them at off(DI)(R10*4).
#define WRSTORE(acc, x, off) \
	VCVTPD2PSY acc, x \
	VMOVUPS x, off(DI)(R10*4)

// func wrowsAVX2(dst *float32, p *float64, rows *float32, stride, n, m int)
// Blocks of 32 outputs keep eight accumulators over all rows (each output's
// sum still runs over s ascending); the remainder goes 4 at a time.
TEXT ·wrowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	MOVQ m+40(FP), R9
	XORQ R10, R10
wrbig:
	LEAQ 32(R10), AX
	CMPQ AX, R9
	JGT  wrone
	ZEROACC8
	LEAQ (DX)(R10*4), R11
	XORQ BX, BX
	JMP  wrbigc
wrbigl:
	VBROADCASTSD (SI)(BX*8), Y8
	WRSTEP(0, Y9, Y0)
	WRSTEP(16, Y10, Y1)
	WRSTEP(32, Y11, Y2)
	WRSTEP(48, Y12, Y3)
	WRSTEP(64, Y9, Y4)
	WRSTEP(80, Y10, Y5)
	WRSTEP(96, Y11, Y6)
	WRSTEP(112, Y12, Y7)
	ADDQ R8, R11
	INCQ BX
wrbigc:
	CMPQ BX, CX
	JLT  wrbigl
	WRSTORE(Y0, X0, 0)
	WRSTORE(Y1, X1, 16)
	WRSTORE(Y2, X2, 32)
	WRSTORE(Y3, X3, 48)
	WRSTORE(Y4, X4, 64)
	WRSTORE(Y5, X5, 80)
	WRSTORE(Y6, X6, 96)
	WRSTORE(Y7, X7, 112)
	ADDQ $32, R10
	JMP  wrbig
wrone:
	LEAQ 4(R10), AX
	CMPQ AX, R9
	JGT  wrdone
	VXORPD Y0, Y0, Y0
	LEAQ (DX)(R10*4), R11
	XORQ BX, BX
	JMP  wronec
wronel:
	VBROADCASTSD (SI)(BX*8), Y8
	WRSTEP(0, Y9, Y0)
	ADDQ R8, R11
	INCQ BX
wronec:
	CMPQ BX, CX
	JLT  wronel
	VCVTPD2PSY Y0, X0
	VMOVUPS X0, (DI)(R10*4)
	ADDQ $4, R10
	JMP  wrone
wrdone:
	VZEROUPPER
	RET
