#include "textflag.h"

// Each routine's header gives its Go signature, its preconditions and its
// register layout; the Go declaration in simd_amd64.go states what it
// computes as a Go loop.

// Eight pointers at (AX) (the rows of the 8-row kernels) into SI, DI, R8-R13;
// eight accumulators Z0-Z7 cleared; and stored to 512 bytes at (AX).
#define LOADPTRS8 \
	MOVQ 0(AX), SI \
	MOVQ 8(AX), DI \
	MOVQ 16(AX), R8 \
	MOVQ 24(AX), R9 \
	MOVQ 32(AX), R10 \
	MOVQ 40(AX), R11 \
	MOVQ 48(AX), R12 \
	MOVQ 56(AX), R13

#define ZEROACC8 \
	VPXORQ Z0, Z0, Z0 \
	VPXORQ Z1, Z1, Z1 \
	VPXORQ Z2, Z2, Z2 \
	VPXORQ Z3, Z3, Z3 \
	VPXORQ Z4, Z4, Z4 \
	VPXORQ Z5, Z5, Z5 \
	VPXORQ Z6, Z6, Z6 \
	VPXORQ Z7, Z7, Z7

#define STOREACC8 \
	VMOVUPD Z0, 0(AX) \
	VMOVUPD Z1, 64(AX) \
	VMOVUPD Z2, 128(AX) \
	VMOVUPD Z3, 192(AX) \
	VMOVUPD Z4, 256(AX) \
	VMOVUPD Z5, 320(AX) \
	VMOVUPD Z6, 384(AX) \
	VMOVUPD Z7, 448(AX)


// Prefetch distance in bytes ahead of the current position of each row.
#define PFD 1024

// func readAVX512(p *byte, n int) uint64
// The XOR of the uint64 words of n bytes (n a positive multiple of 512),
// read as 8 concurrent streams, one per eighth, with the same prefetch
// distance as the mat-vec kernels: the access pattern of a mat-vec with 8
// rows in flight.
TEXT ·readAVX512(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	LEAQ (SI)(CX*1), DI
	LEAQ (DI)(CX*1), R8
	LEAQ (R8)(CX*1), R9
	LEAQ (R9)(CX*1), R10
	LEAQ (R10)(CX*1), R11
	LEAQ (R11)(CX*1), R12
	LEAQ (R12)(CX*1), R13
	XORQ BX, BX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
rloop:
	PREFETCHT0 PFD(SI)(BX*1)
	PREFETCHT0 PFD(DI)(BX*1)
	PREFETCHT0 PFD(R8)(BX*1)
	PREFETCHT0 PFD(R9)(BX*1)
	PREFETCHT0 PFD(R10)(BX*1)
	PREFETCHT0 PFD(R11)(BX*1)
	PREFETCHT0 PFD(R12)(BX*1)
	PREFETCHT0 PFD(R13)(BX*1)
	VPXORQ 0(SI)(BX*1), Z0, Z0
	VPXORQ 0(DI)(BX*1), Z1, Z1
	VPXORQ 0(R8)(BX*1), Z2, Z2
	VPXORQ 0(R9)(BX*1), Z3, Z3
	VPXORQ 0(R10)(BX*1), Z0, Z0
	VPXORQ 0(R11)(BX*1), Z1, Z1
	VPXORQ 0(R12)(BX*1), Z2, Z2
	VPXORQ 0(R13)(BX*1), Z3, Z3
	ADDQ $64, BX
	CMPQ BX, CX
	JB   rloop
	VPXORQ Z1, Z0, Z0
	VPXORQ Z3, Z2, Z2
	VPXORQ Z2, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPXORQ Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPXOR X1, X0, X0
	VPSRLDQ $8, X0, X1
	VPXOR X1, X0, X0
	MOVQ X0, AX
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET


// One 8-element step of one bf16 row, decoded exactly with integer
// operations: the sign-extended word shifted left by 45 and masked to
// s000eeeeeeeemmmmmmm000... is the bf16 value times 2^-896 as a float64
// (zero, subnormal and normal alike); the activations are pre-scaled by
// 2^896, so each product is exact. Exponent 255 (Inf/NaN) would decode to a
// finite value: the caller is told through the result and falls back.
// Prefetch of the bf16 mat-vec: distance ahead of each row, instruction.
#define BFPFD 1024
#define BFPF PREFETCHT0

#define BF16ISTEP(off, row, ty, tz, acc) \
	VPMOVSXWQ off(row)(BX*1), tz \
	VPSLLQ    $45, tz, tz \
	VPANDQ    Z9, tz, tz \
	VFMADD231PD tz, Z8, acc

// func bf16Rows8AVX512(rows *[8]*uint16, x *float64, n int, acc *[64]float64) (finite bool)
// 8 bf16 rows, n a multiple of 8, x pre-scaled by 2^896: the lanes of row r
// in Z(r), stored to acc[r*8:]. Z28/Z29 keep the unsigned maximum of the
// weights' dwords rotated left by one bit, which moves each word's sign out
// of it, so that finite reports whether no weight has exponent 255.
TEXT ·bf16Rows8AVX512(SB), NOSPLIT, $0-33
	MOVQ rows+0(FP), AX
	LOADPTRS8
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	SHLQ $1, CX        // bytes of bf16 per row
	MOVQ acc+24(FP), AX
	ZEROACC8
	XORQ BX, BX
	VPXORQ Z28, Z28, Z28
	VPXORQ Z29, Z29, Z29
	MOVQ $0x8fffffffffffffff, AX
	VPBROADCASTQ AX, Z9
	MOVQ acc+24(FP), AX
	LEAQ -64(CX), R14
	CMPQ BX, R14
	JG   itail
iloop4:
	// also prefetch the first 1 KiB of each row of the next 8-row block
	// (row 8 = row 7 + the row stride), one line per step, while BX < 8 KiB
	CMPQ BX, $8192
	JAE  inonext
	MOVQ BX, R15
	SHRQ $10, R15
	INCQ R15
	MOVQ DI, AX
	SUBQ SI, AX
	IMULQ AX, R15
	ADDQ R13, R15
	MOVQ BX, AX
	ANDQ $1023, AX
	BFPF (R15)(AX*1)
inonext:
	BFPF BFPFD(SI)(BX*1)
	VPROLD $1, 0(SI)(BX*1), Z24
	VPMAXUW Z24, Z28, Z28
	BFPF BFPFD(DI)(BX*1)
	VPROLD $1, 0(DI)(BX*1), Z25
	VPMAXUW Z25, Z29, Z29
	BFPF BFPFD(R8)(BX*1)
	VPROLD $1, 0(R8)(BX*1), Z26
	VPMAXUW Z26, Z28, Z28
	BFPF BFPFD(R9)(BX*1)
	VPROLD $1, 0(R9)(BX*1), Z27
	VPMAXUW Z27, Z29, Z29
	BFPF BFPFD(R10)(BX*1)
	VPROLD $1, 0(R10)(BX*1), Z24
	VPMAXUW Z24, Z28, Z28
	BFPF BFPFD(R11)(BX*1)
	VPROLD $1, 0(R11)(BX*1), Z25
	VPMAXUW Z25, Z29, Z29
	BFPF BFPFD(R12)(BX*1)
	VPROLD $1, 0(R12)(BX*1), Z26
	VPMAXUW Z26, Z28, Z28
	BFPF BFPFD(R13)(BX*1)
	VPROLD $1, 0(R13)(BX*1), Z27
	VPMAXUW Z27, Z29, Z29
	VMOVUPD 0(DX)(BX*4), Z8
	BF16ISTEP(0, SI, Y16, Z16, Z0)
	BF16ISTEP(0, DI, Y17, Z17, Z1)
	BF16ISTEP(0, R8, Y18, Z18, Z2)
	BF16ISTEP(0, R9, Y19, Z19, Z3)
	BF16ISTEP(0, R10, Y20, Z20, Z4)
	BF16ISTEP(0, R11, Y21, Z21, Z5)
	BF16ISTEP(0, R12, Y22, Z22, Z6)
	BF16ISTEP(0, R13, Y23, Z23, Z7)
	VMOVUPD 64(DX)(BX*4), Z8
	BF16ISTEP(16, SI, Y16, Z16, Z0)
	BF16ISTEP(16, DI, Y17, Z17, Z1)
	BF16ISTEP(16, R8, Y18, Z18, Z2)
	BF16ISTEP(16, R9, Y19, Z19, Z3)
	BF16ISTEP(16, R10, Y20, Z20, Z4)
	BF16ISTEP(16, R11, Y21, Z21, Z5)
	BF16ISTEP(16, R12, Y22, Z22, Z6)
	BF16ISTEP(16, R13, Y23, Z23, Z7)
	VMOVUPD 128(DX)(BX*4), Z8
	BF16ISTEP(32, SI, Y16, Z16, Z0)
	BF16ISTEP(32, DI, Y17, Z17, Z1)
	BF16ISTEP(32, R8, Y18, Z18, Z2)
	BF16ISTEP(32, R9, Y19, Z19, Z3)
	BF16ISTEP(32, R10, Y20, Z20, Z4)
	BF16ISTEP(32, R11, Y21, Z21, Z5)
	BF16ISTEP(32, R12, Y22, Z22, Z6)
	BF16ISTEP(32, R13, Y23, Z23, Z7)
	VMOVUPD 192(DX)(BX*4), Z8
	BF16ISTEP(48, SI, Y16, Z16, Z0)
	BF16ISTEP(48, DI, Y17, Z17, Z1)
	BF16ISTEP(48, R8, Y18, Z18, Z2)
	BF16ISTEP(48, R9, Y19, Z19, Z3)
	BF16ISTEP(48, R10, Y20, Z20, Z4)
	BF16ISTEP(48, R11, Y21, Z21, Z5)
	BF16ISTEP(48, R12, Y22, Z22, Z6)
	BF16ISTEP(48, R13, Y23, Z23, Z7)
	ADDQ $64, BX
	CMPQ BX, R14
	JLE  iloop4
itail:
	CMPQ BX, CX
	JGE  idone
	VPROLD $1, 0(SI)(BX*1), X24
	VPROLD $1, 0(DI)(BX*1), X25
	VPROLD $1, 0(R8)(BX*1), X26
	VPROLD $1, 0(R9)(BX*1), X27
	VPMAXUW Z24, Z28, Z28
	VPMAXUW Z25, Z29, Z29
	VPMAXUW Z26, Z28, Z28
	VPMAXUW Z27, Z29, Z29
	VPROLD $1, 0(R10)(BX*1), X24
	VPROLD $1, 0(R11)(BX*1), X25
	VPROLD $1, 0(R12)(BX*1), X26
	VPROLD $1, 0(R13)(BX*1), X27
	VPMAXUW Z24, Z28, Z28
	VPMAXUW Z25, Z29, Z29
	VPMAXUW Z26, Z28, Z28
	VPMAXUW Z27, Z29, Z29
	VMOVUPD 0(DX)(BX*4), Z8
	BF16ISTEP(0, SI, Y16, Z16, Z0)
	BF16ISTEP(0, DI, Y17, Z17, Z1)
	BF16ISTEP(0, R8, Y18, Z18, Z2)
	BF16ISTEP(0, R9, Y19, Z19, Z3)
	BF16ISTEP(0, R10, Y20, Z20, Z4)
	BF16ISTEP(0, R11, Y21, Z21, Z5)
	BF16ISTEP(0, R12, Y22, Z22, Z6)
	BF16ISTEP(0, R13, Y23, Z23, Z7)
	ADDQ $16, BX
	JMP  itail
idone:
	MOVQ acc+24(FP), AX
	STOREACC8
	// a bf16 exponent of 255 (Inf/NaN) shows as a rotated word >= 0xFF00
	VPMAXUW Z29, Z28, Z28
	MOVL $0xff00, AX
	VPBROADCASTW AX, Z24
	VPCMPUW $5, Z24, Z28, K1
	KORTESTD K1, K1
	SETEQ finite+32(FP)
	VZEROUPPER
	RET

// func f32Rows8AVX512(rows *[8]*float32, x *float64, n int, acc *[64]float64)
// 8 float32 rows, n a multiple of 8: each step widens 8 weights (VCVTPS2PD)
// and accumulates; the lanes of row r in Z(r), stored to acc[r*8:].
TEXT ·f32Rows8AVX512(SB), NOSPLIT, $0-32
	MOVQ rows+0(FP), AX
	LOADPTRS8
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	ZEROACC8
	XORQ BX, BX
	LEAQ -64(CX), R14
	CMPQ BX, R14
	JG   f32tail
f32loop:
	PREFETCHT0 PFD(SI)(BX*1)
	PREFETCHT0 PFD(DI)(BX*1)
	PREFETCHT0 PFD(R8)(BX*1)
	PREFETCHT0 PFD(R9)(BX*1)
	PREFETCHT0 PFD(R10)(BX*1)
	PREFETCHT0 PFD(R11)(BX*1)
	PREFETCHT0 PFD(R12)(BX*1)
	PREFETCHT0 PFD(R13)(BX*1)
	VMOVUPD 0(DX)(BX*2), Z8
	VCVTPS2PD 0(SI)(BX*1), Z16
	VFMADD231PD Z16, Z8, Z0
	VCVTPS2PD 0(DI)(BX*1), Z17
	VFMADD231PD Z17, Z8, Z1
	VCVTPS2PD 0(R8)(BX*1), Z18
	VFMADD231PD Z18, Z8, Z2
	VCVTPS2PD 0(R9)(BX*1), Z19
	VFMADD231PD Z19, Z8, Z3
	VCVTPS2PD 0(R10)(BX*1), Z20
	VFMADD231PD Z20, Z8, Z4
	VCVTPS2PD 0(R11)(BX*1), Z21
	VFMADD231PD Z21, Z8, Z5
	VCVTPS2PD 0(R12)(BX*1), Z22
	VFMADD231PD Z22, Z8, Z6
	VCVTPS2PD 0(R13)(BX*1), Z23
	VFMADD231PD Z23, Z8, Z7
	VMOVUPD 64(DX)(BX*2), Z8
	VCVTPS2PD 32(SI)(BX*1), Z16
	VFMADD231PD Z16, Z8, Z0
	VCVTPS2PD 32(DI)(BX*1), Z17
	VFMADD231PD Z17, Z8, Z1
	VCVTPS2PD 32(R8)(BX*1), Z18
	VFMADD231PD Z18, Z8, Z2
	VCVTPS2PD 32(R9)(BX*1), Z19
	VFMADD231PD Z19, Z8, Z3
	VCVTPS2PD 32(R10)(BX*1), Z20
	VFMADD231PD Z20, Z8, Z4
	VCVTPS2PD 32(R11)(BX*1), Z21
	VFMADD231PD Z21, Z8, Z5
	VCVTPS2PD 32(R12)(BX*1), Z22
	VFMADD231PD Z22, Z8, Z6
	VCVTPS2PD 32(R13)(BX*1), Z23
	VFMADD231PD Z23, Z8, Z7
	ADDQ $64, BX
	CMPQ BX, R14
	JLE  f32loop
f32tail:
	CMPQ BX, CX
	JGE  f32done
	VMOVUPD 0(DX)(BX*2), Z8
	VCVTPS2PD 0(SI)(BX*1), Z16
	VFMADD231PD Z16, Z8, Z0
	VCVTPS2PD 0(DI)(BX*1), Z17
	VFMADD231PD Z17, Z8, Z1
	VCVTPS2PD 0(R8)(BX*1), Z18
	VFMADD231PD Z18, Z8, Z2
	VCVTPS2PD 0(R9)(BX*1), Z19
	VFMADD231PD Z19, Z8, Z3
	VCVTPS2PD 0(R10)(BX*1), Z20
	VFMADD231PD Z20, Z8, Z4
	VCVTPS2PD 0(R11)(BX*1), Z21
	VFMADD231PD Z21, Z8, Z5
	VCVTPS2PD 0(R12)(BX*1), Z22
	VFMADD231PD Z22, Z8, Z6
	VCVTPS2PD 0(R13)(BX*1), Z23
	VFMADD231PD Z23, Z8, Z7
	ADDQ $32, BX
	JMP  f32tail
f32done:
	MOVQ acc+24(FP), AX
	STOREACC8
	VZEROUPPER
	RET

// func decodeF32AVX512(src *float32, dst *float64, n int)
// dst[i] = float64(src[i]) for i < n (n a multiple of 8).
TEXT ·decodeF32AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	JMP  df32cond
df32loop:
	VCVTPS2PD 0(SI)(BX*1), Z0
	VMOVUPD Z0, 0(DI)(BX*2)
	ADDQ $32, BX
df32cond:
	CMPQ BX, CX
	JLT  df32loop
	VZEROUPPER
	RET

// func decodeBF16AVX512(src *uint16, dst *float64, n int)
// dst[i] = float64(bf16 src[i]) exactly, subnormals, Inf and NaN included
// (n a multiple of 8).
TEXT ·decodeBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $1, CX
	XORQ BX, BX
	JMP  dbfcond
dbfloop:
	VPMOVZXWD 0(SI)(BX*1), Y0
	VPSLLD    $16, Y0, Y0
	VCVTPS2PD Y0, Z0
	VMOVUPD   Z0, 0(DI)(BX*4)
	ADDQ $16, BX
dbfcond:
	CMPQ BX, CX
	JLT  dbfloop
	VZEROUPPER
	RET

// func decodeMXFP4AVX512(a *mxArgs, dst *float64, n int)
// Decodes one MXFP4 row (packed[0], scales[0] of a) to float64, n a multiple
// of 32; a group with scale 255 decodes to zeros.
TEXT ·decodeMXFP4AVX512(SB), NOSPLIT, $0-24
	MOVQ a+0(FP), AX
	MOVQ 0(AX), SI
	MOVQ 64(AX), R8
	MOVQ 128(AX), R9
	MOVQ 136(AX), R10
	VMOVUPD 0(R10), Z10
	VMOVUPD 64(R10), Z11
	VMOVDQU64 144(AX), Z9
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JEQ  dmxdone
dmxloop:
	MOVBQZX 0(R8), DX
	VBROADCASTSD (R9)(DX*8), Z8
	VMULPD Z8, Z10, Z12
	VMULPD Z8, Z11, Z13
	VPBROADCASTD 0(SI), Z0
	VPBROADCASTD 4(SI), Z1
	VPBROADCASTD 8(SI), Z2
	VPBROADCASTD 12(SI), Z3
	VPSRLVQ Z9, Z0, Z0
	VPSRLVQ Z9, Z1, Z1
	VPSRLVQ Z9, Z2, Z2
	VPSRLVQ Z9, Z3, Z3
	VPERMI2PD Z13, Z12, Z0
	VPERMI2PD Z13, Z12, Z1
	VPERMI2PD Z13, Z12, Z2
	VPERMI2PD Z13, Z12, Z3
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	ADDQ $16, SI
	INCQ R8
	ADDQ $256, DI
	DECQ CX
	JNZ  dmxloop
dmxdone:
	VZEROUPPER
	RET


// gemmArgs layout: w [6]*float64 at 0, x [4]*float64 at 48, acc *float64 at 80,
// accStride (bytes between rows of acc) at 88. acc holds, for row r and token
// t, the 8 lanes at acc + r*accStride + t*64.
//
// func gemm6x4AVX512(a *gemmArgs, k int)
// For r < 6, t < 4: lanes[r][t] += w[r][i]*x[t][i] for i < k (k a multiple
// of 8), element i into lane i mod 8, ascending. The lanes of row r, token t
// are in Z(4r+t) between the load from acc and the store back.
TEXT ·gemm6x4AVX512(SB), NOSPLIT, $0-16
	MOVQ a+0(FP), AX
	LOADPTRS8
	MOVQ 64(AX), R14
	MOVQ 72(AX), DX
	MOVQ 88(AX), CX
	MOVQ 80(AX), BX
	VMOVUPD 0(BX), Z0
	VMOVUPD 64(BX), Z1
	VMOVUPD 128(BX), Z2
	VMOVUPD 192(BX), Z3
	ADDQ CX, BX
	VMOVUPD 0(BX), Z4
	VMOVUPD 64(BX), Z5
	VMOVUPD 128(BX), Z6
	VMOVUPD 192(BX), Z7
	ADDQ CX, BX
	VMOVUPD 0(BX), Z8
	VMOVUPD 64(BX), Z9
	VMOVUPD 128(BX), Z10
	VMOVUPD 192(BX), Z11
	ADDQ CX, BX
	VMOVUPD 0(BX), Z12
	VMOVUPD 64(BX), Z13
	VMOVUPD 128(BX), Z14
	VMOVUPD 192(BX), Z15
	ADDQ CX, BX
	VMOVUPD 0(BX), Z16
	VMOVUPD 64(BX), Z17
	VMOVUPD 128(BX), Z18
	VMOVUPD 192(BX), Z19
	ADDQ CX, BX
	VMOVUPD 0(BX), Z20
	VMOVUPD 64(BX), Z21
	VMOVUPD 128(BX), Z22
	VMOVUPD 192(BX), Z23
	MOVQ k+8(FP), CX
	SHLQ $3, CX
	XORQ BX, BX
	JMP  g64cond
g64loop:
	VMOVUPD 0(R12)(BX*1), Z24
	VMOVUPD 0(R13)(BX*1), Z25
	VMOVUPD 0(R14)(BX*1), Z26
	VMOVUPD 0(DX)(BX*1), Z27
	VMOVUPD 0(SI)(BX*1), Z28
	VFMADD231PD Z24, Z28, Z0
	VFMADD231PD Z25, Z28, Z1
	VFMADD231PD Z26, Z28, Z2
	VFMADD231PD Z27, Z28, Z3
	VMOVUPD 0(DI)(BX*1), Z29
	VFMADD231PD Z24, Z29, Z4
	VFMADD231PD Z25, Z29, Z5
	VFMADD231PD Z26, Z29, Z6
	VFMADD231PD Z27, Z29, Z7
	VMOVUPD 0(R8)(BX*1), Z30
	VFMADD231PD Z24, Z30, Z8
	VFMADD231PD Z25, Z30, Z9
	VFMADD231PD Z26, Z30, Z10
	VFMADD231PD Z27, Z30, Z11
	VMOVUPD 0(R9)(BX*1), Z31
	VFMADD231PD Z24, Z31, Z12
	VFMADD231PD Z25, Z31, Z13
	VFMADD231PD Z26, Z31, Z14
	VFMADD231PD Z27, Z31, Z15
	VMOVUPD 0(R10)(BX*1), Z28
	VFMADD231PD Z24, Z28, Z16
	VFMADD231PD Z25, Z28, Z17
	VFMADD231PD Z26, Z28, Z18
	VFMADD231PD Z27, Z28, Z19
	VMOVUPD 0(R11)(BX*1), Z29
	VFMADD231PD Z24, Z29, Z20
	VFMADD231PD Z25, Z29, Z21
	VFMADD231PD Z26, Z29, Z22
	VFMADD231PD Z27, Z29, Z23
	ADDQ $64, BX
g64cond:
	CMPQ BX, CX
	JLT  g64loop
	MOVQ a+0(FP), AX
	MOVQ 88(AX), CX
	MOVQ 80(AX), BX
	VMOVUPD Z0, 0(BX)
	VMOVUPD Z1, 64(BX)
	VMOVUPD Z2, 128(BX)
	VMOVUPD Z3, 192(BX)
	ADDQ CX, BX
	VMOVUPD Z4, 0(BX)
	VMOVUPD Z5, 64(BX)
	VMOVUPD Z6, 128(BX)
	VMOVUPD Z7, 192(BX)
	ADDQ CX, BX
	VMOVUPD Z8, 0(BX)
	VMOVUPD Z9, 64(BX)
	VMOVUPD Z10, 128(BX)
	VMOVUPD Z11, 192(BX)
	ADDQ CX, BX
	VMOVUPD Z12, 0(BX)
	VMOVUPD Z13, 64(BX)
	VMOVUPD Z14, 128(BX)
	VMOVUPD Z15, 192(BX)
	ADDQ CX, BX
	VMOVUPD Z16, 0(BX)
	VMOVUPD Z17, 64(BX)
	VMOVUPD Z18, 128(BX)
	VMOVUPD Z19, 192(BX)
	ADDQ CX, BX
	VMOVUPD Z20, 0(BX)
	VMOVUPD Z21, 64(BX)
	VMOVUPD Z22, 128(BX)
	VMOVUPD Z23, 192(BX)
	VZEROUPPER
	RET

// func dotF32AVX512(w, x *float32, n int, acc *[8]float64)
// acc = the 8 contract lanes of Σ w[i]*x[i] over n elements (n a multiple of 8).
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	VPXORQ Z0, Z0, Z0
	JMP  dotcond
dotloop:
	VCVTPS2PD 0(SI)(BX*1), Z1
	VCVTPS2PD 0(DI)(BX*1), Z2
	VFMADD231PD Z1, Z2, Z0
	ADDQ $32, BX
dotcond:
	CMPQ BX, CX
	JLT  dotloop
	MOVQ acc+24(FP), AX
	VMOVUPD Z0, 0(AX)
	VZEROUPPER
	RET

// func tvecAVX512(w unsafe.Pointer, stride int, bf16 bool, x *float64, n int, out *[64]float64)
// For 64 consecutive columns c: out[c] = Σ_{i<n} x[i]*W[i][c], sequential in
// i from +0, where row i of W starts at w + i*stride bytes (float32, or
// bfloat16 if bf16); columns 8j..8j+7 in Z(j).
TEXT ·tvecAVX512(SB), NOSPLIT, $0-48
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
	VBROADCASTSD 0(DI), Z8
	VCVTPS2PD 0(SI), Z16
	VFMADD231PD Z16, Z8, Z0
	VCVTPS2PD 32(SI), Z17
	VFMADD231PD Z17, Z8, Z1
	VCVTPS2PD 64(SI), Z18
	VFMADD231PD Z18, Z8, Z2
	VCVTPS2PD 96(SI), Z19
	VFMADD231PD Z19, Z8, Z3
	VCVTPS2PD 128(SI), Z20
	VFMADD231PD Z20, Z8, Z4
	VCVTPS2PD 160(SI), Z21
	VFMADD231PD Z21, Z8, Z5
	VCVTPS2PD 192(SI), Z22
	VFMADD231PD Z22, Z8, Z6
	VCVTPS2PD 224(SI), Z23
	VFMADD231PD Z23, Z8, Z7
	ADDQ DX, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  tvf32
	JMP  tvdone
tvbf:
	VBROADCASTSD 0(DI), Z8
	VPMOVZXWD 0(SI), Y16
	VPSLLD $16, Y16, Y16
	VCVTPS2PD Y16, Z16
	VFMADD231PD Z16, Z8, Z0
	VPMOVZXWD 16(SI), Y17
	VPSLLD $16, Y17, Y17
	VCVTPS2PD Y17, Z17
	VFMADD231PD Z17, Z8, Z1
	VPMOVZXWD 32(SI), Y18
	VPSLLD $16, Y18, Y18
	VCVTPS2PD Y18, Z18
	VFMADD231PD Z18, Z8, Z2
	VPMOVZXWD 48(SI), Y19
	VPSLLD $16, Y19, Y19
	VCVTPS2PD Y19, Z19
	VFMADD231PD Z19, Z8, Z3
	VPMOVZXWD 64(SI), Y20
	VPSLLD $16, Y20, Y20
	VCVTPS2PD Y20, Z20
	VFMADD231PD Z20, Z8, Z4
	VPMOVZXWD 80(SI), Y21
	VPSLLD $16, Y21, Y21
	VCVTPS2PD Y21, Z21
	VFMADD231PD Z21, Z8, Z5
	VPMOVZXWD 96(SI), Y22
	VPSLLD $16, Y22, Y22
	VCVTPS2PD Y22, Z22
	VFMADD231PD Z22, Z8, Z6
	VPMOVZXWD 112(SI), Y23
	VPSLLD $16, Y23, Y23
	VCVTPS2PD Y23, Z23
	VFMADD231PD Z23, Z8, Z7
	ADDQ DX, SI
	ADDQ $8, DI
	DECQ CX
	JNZ  tvbf
tvdone:
	MOVQ out+40(FP), AX
	STOREACC8
	VZEROUPPER
	RET


// func mixAVX512(dst *float32, srcs **float32, s *float64, nsrc, n int)
// dst[i] = float32(Σ_j s[j]*float64(srcs[j][i])), j ascending from +0, each
// product rounded before the add (no FMA), for i < n (n a multiple of 8);
// nsrc >= 1: the loop over the sources runs at least once.
TEXT ·mixAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ srcs+8(FP), SI
	MOVQ s+16(FP), DX
	MOVQ nsrc+24(FP), R8
	MOVQ n+32(FP), CX
	SHLQ $2, CX
	XORQ BX, BX
	JMP  mixcond
mixouter:
	VXORPD Z0, Z0, Z0
	XORQ R9, R9
mixinner:
	MOVQ (SI)(R9*8), R10
	VCVTPS2PD (R10)(BX*1), Z1
	VBROADCASTSD (DX)(R9*8), Z2
	VMULPD Z2, Z1, Z1
	VADDPD Z1, Z0, Z0
	INCQ R9
	CMPQ R9, R8
	JLT  mixinner
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, (DI)(BX*1)
	ADDQ $32, BX
mixcond:
	CMPQ BX, CX
	JLT  mixouter
	VZEROUPPER
	RET

// MXFP4, 8 rows in flight. Per group of 32 elements each row's scaled E2M1
// table mxTable[s] (16 float64; row 255 is zero, so a NaN-scale group adds
// only zero products) is loaded into two registers; each 8-element step
// broadcasts packed bytes, shifts qword q right by 4q so that its low 4 bits
// are the code of element q, and looks the codes up with VPERMI2PD. One
// 8-byte load serves two steps. Each iteration does one group (16 bytes per
// row; a longer unrolled body was slower) and prefetches the next 8-row
// block, which follows this one in memory (pf), at the rate this block is
// consumed, and its scales (pfs; without it every block starts with ~16
// scale misses, each stalling a table load). The tables must be 64-byte
// aligned (mxTab): a table load split across two cache lines is markedly
// slower. The measurements are in docs/BENCHMARKS.md.
//
// mxArgs layout: packed [8]*byte at 0, scales [8]*byte at 64, shifts [8]uint64
// at 144, tab *[256][16]float64 at 232, pf *byte at 240, pfs *byte at 248.
#define MXPF PREFETCHT0

// Load row j's scaled E2M1 table for group CX+g: mxTable[s] (16 float64,
// codes 0-7 in tlo, 8-15 in thi; row 255 is all zero).
#define MXTAB(soff, g, tlo, thi) \
	MOVQ soff(AX), R14 \
	MOVBQZX g(R14)(CX*1), R14 \
	SHLQ $7, R14 \
	VMOVUPD (R15)(R14*1), tlo \
	VMOVUPD 64(R15)(R14*1), thi

// Steps 2j and 2j+1 of one row: the 8 packed bytes at boff are broadcast to
// every qword; step 2j shifts qword q right by 4q (Z9), step 2j+1 by 32+4q
// (Z30), and VPERMI2PD looks up the low 4 bits of each qword in the row's
// scaled table. Activations: Z8 (step 2j), Z31 (step 2j+1).
#define MXPAIR(boff, row, tlo, thi, acc) \
	VPBROADCASTQ boff(row)(BX*1), Z26 \
	VPSRLVQ Z9, Z26, Z27 \
	VPSRLVQ Z30, Z26, Z28 \
	VPERMI2PD thi, tlo, Z27 \
	VPERMI2PD thi, tlo, Z28 \
	VFMADD231PD Z27, Z8, acc \
	VFMADD231PD Z28, Z31, acc

#define MXPAIR8(boff) \
	MXPAIR(boff, SI, Z10, Z11, Z0) \
	MXPAIR(boff, DI, Z12, Z13, Z1) \
	MXPAIR(boff, R8, Z14, Z15, Z2) \
	MXPAIR(boff, R9, Z16, Z17, Z3) \
	MXPAIR(boff, R10, Z18, Z19, Z4) \
	MXPAIR(boff, R11, Z20, Z21, Z5) \
	MXPAIR(boff, R12, Z22, Z23, Z6) \
	MXPAIR(boff, R13, Z24, Z25, Z7)

// One group of 32 elements of all 8 rows: packed bytes at BX+b0..b0+15 (b2 = b0+8),
// scales at CX+g, activations at DX+x0.
#define MXGROUP(g, b0, b2, x0, x1, x2, x3) \
	MXTAB(64, g, Z10, Z11) \
	MXTAB(72, g, Z12, Z13) \
	MXTAB(80, g, Z14, Z15) \
	MXTAB(88, g, Z16, Z17) \
	MXTAB(96, g, Z18, Z19) \
	MXTAB(104, g, Z20, Z21) \
	MXTAB(112, g, Z22, Z23) \
	MXTAB(120, g, Z24, Z25) \
	VMOVUPD x0(DX), Z8 \
	VMOVUPD x1(DX), Z31 \
	MXPAIR8(b0) \
	VMOVUPD x2(DX), Z8 \
	VMOVUPD x3(DX), Z31 \
	MXPAIR8(b2)

// func mxfp4Rows8AVX512(a *mxArgs, x *float64, n int, acc *[64]float64)
// 8 MXFP4 rows of n elements (n a multiple of 32): the lanes of row r in
// Z(r), stored to acc[r*8:]; row r's table of the current group in Z(10+2r)
// (codes 0-7) and Z(11+2r) (codes 8-15).
TEXT ·mxfp4Rows8AVX512(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), AX
	LOADPTRS8
	MOVQ 232(AX), R15
	VMOVDQU64 144(AX), Z9
	MOVQ $32, R14
	VPBROADCASTQ R14, Z30
	VPADDQ Z9, Z30, Z30
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), R14
	SHRQ $1, R14         // packed bytes per row
	XORQ BX, BX
	XORQ CX, CX
	ZEROACC8
	MOVQ R14, n+16(FP)   // packed bytes per row
	TESTQ R14, R14
	JEQ  msdone
	PCALIGN $64
ms1:
	// prefetch the next 8-row block (contiguous, 8x this block's position)
	MOVQ 240(AX), R14
	LEAQ (R14)(BX*8), R14
	MXPF 0(R14)
	MXPF 64(R14)
	// and its scales (8 rows x n/32 bytes, contiguous): 8 bytes a group
	MOVQ 248(AX), R14
	MXPF (R14)(CX*8)
	MXGROUP(0, 0, 8, 0, 64, 128, 192)
	ADDQ $16, BX
	INCQ CX
	ADDQ $256, DX
	CMPQ BX, n+16(FP)
	JLT  ms1
msdone:
	MOVQ acc+24(FP), AX
	STOREACC8
	VZEROUPPER
	RET


// One row of WeightedRows for one register of outputs: widen the float32
// values at off(R11), multiply by the row's weight (Z8), add.
#define WRSTEP(off, t, acc) \
	VCVTPS2PD off(R11), t \
	VMULPD Z8, t, t \
	VADDPD t, acc, acc

// func wrowsAVX512(dst *float32, p *float64, rows *float32, stride, n, m int)
// Blocks of 64 outputs keep eight accumulators over all rows (each output's
// sum still runs over s ascending); the remainder goes 8 at a time.
TEXT ·wrowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8
	MOVQ n+32(FP), CX
	MOVQ m+40(FP), R9
	XORQ R10, R10
wrbig:
	LEAQ 64(R10), AX
	CMPQ AX, R9
	JGT  wrone
	ZEROACC8
	LEAQ (DX)(R10*4), R11
	XORQ BX, BX
	JMP  wrbigc
wrbigl:
	VBROADCASTSD (SI)(BX*8), Z8
	WRSTEP(0, Z9, Z0)
	WRSTEP(32, Z10, Z1)
	WRSTEP(64, Z11, Z2)
	WRSTEP(96, Z12, Z3)
	WRSTEP(128, Z13, Z4)
	WRSTEP(160, Z14, Z5)
	WRSTEP(192, Z15, Z6)
	WRSTEP(224, Z16, Z7)
	ADDQ R8, R11
	INCQ BX
wrbigc:
	CMPQ BX, CX
	JLT  wrbigl
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, 0(DI)(R10*4)
	VCVTPD2PS Z1, Y1
	VMOVUPS Y1, 32(DI)(R10*4)
	VCVTPD2PS Z2, Y2
	VMOVUPS Y2, 64(DI)(R10*4)
	VCVTPD2PS Z3, Y3
	VMOVUPS Y3, 96(DI)(R10*4)
	VCVTPD2PS Z4, Y4
	VMOVUPS Y4, 128(DI)(R10*4)
	VCVTPD2PS Z5, Y5
	VMOVUPS Y5, 160(DI)(R10*4)
	VCVTPD2PS Z6, Y6
	VMOVUPS Y6, 192(DI)(R10*4)
	VCVTPD2PS Z7, Y7
	VMOVUPS Y7, 224(DI)(R10*4)
	ADDQ $64, R10
	JMP  wrbig
wrone:
	LEAQ 8(R10), AX
	CMPQ AX, R9
	JGT  wrdone
	VPXORQ Z0, Z0, Z0
	LEAQ (DX)(R10*4), R11
	XORQ BX, BX
	JMP  wronec
wronel:
	VBROADCASTSD (SI)(BX*8), Z8
	WRSTEP(0, Z9, Z0)
	ADDQ R8, R11
	INCQ BX
wronec:
	CMPQ BX, CX
	JLT  wronel
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, (DI)(R10*4)
	ADDQ $8, R10
	JMP  wrone
wrdone:
	VZEROUPPER
	RET
