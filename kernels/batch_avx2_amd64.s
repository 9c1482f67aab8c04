#include "textflag.h"
#include "avx2_amd64.h"

// The AVX2 small-batch kernels (batch_amd64.go). tile*: multiply a group of
// 12 decoded weight rows with 1 to 4 tokens over one column block; dtile*:
// the same with bf16 rows widened from the matrix in the loop; decodeRows*:
// decode a group of rows of one block to float64. Each tile keeps its 12 (or
// 9) lane accumulators (4 float64 lanes of one row and one token) in Y0-Y11
// and walks the block one half of the 8 lanes at a time (lanes 0-3, then
// 4-7: the vectors 64 bytes apart), so a tile holds twice the rows x tokens
// that both halves at once would. Decoded rows are 2112 bytes (bkWS
// float64s) apart.
//
// The macros below are the pieces the tiles share; each expands to the
// instructions it lists, in that order.

// tileArgs (batch_amd64.go)
#define T_W 0
#define T_X 8
#define T_XS 16
#define T_ACC 24
#define T_ACCROW 32
#define T_N 40
#define T_CTRL 48
#define T_DEC 56

// dtileArgs
#define D_SRC 0
#define D_STRIDE 8
#define D_X 40
#define D_XS 48
#define D_ACC 56
#define D_ACCROW 64
#define D_N 72

// TILE_HEAD starts a tile kernel (AX = a): R9 = a.xstride, R10 = a.accRow;
// for each half (R12 = 0, 32 bytes) and each tile of rows (R13 = its first
// row), WPTR points SI at the tile's weights, BX at its lane accumulators
// (row R13, the half) and DI at the first token's activations (the half).
#define TILE_HEAD(half, tile, WPTR) \
	MOVQ T_XS(AX), R9 \
	MOVQ T_ACCROW(AX), R10 \
	XORQ R12, R12 \
half: \
	XORQ R13, R13 \
tile: \
	WPTR \
	MOVQ R13, BX \
	IMULQ R10, BX \
	ADDQ T_ACC(AX), BX \
	ADDQ R12, BX \
	MOVQ T_X(AX), DI \
	ADDQ R12, DI

// The WPTR of TILE_HEAD: decoded float64 rows 2112 bytes apart (the half
// 32 bytes in); MXFP4 word rows 576 bytes apart (the half 16 bytes in).
#define W64PTR \
	IMUL3Q $2112, R13, SI \
	ADDQ T_W(AX), SI \
	ADDQ R12, SI

#define WMXPTR \
	IMUL3Q $576, R13, SI \
	ADDQ T_W(AX), SI \
	MOVQ R12, DX \
	SHRQ $1, DX \
	ADDQ DX, SI

// TILE_TAIL moves to the next tile of rows rows, then to the next half.
#define TILE_TAIL(rows, half, tile) \
	ADDQ $rows, R13 \
	CMPQ R13, $12 \
	JLT  tile \
	ADDQ $32, R12 \
	CMPQ R12, $64 \
	JLT  half \
	VZEROUPPER \
	RET

// DTILE_HEAD starts a dtile kernel (AX = a): R8 = a.stride, R9 = a.xstride;
// for each half (R13 = 0, 32 bytes) SI = the rows' bf16 words (the half 8
// bytes in), DI = the first token's activations. DACCPTR points R10 at the
// half's lane accumulators of row 0 and s at a.accRow.
#define DTILE_HEAD(half) \
	MOVQ D_STRIDE(AX), R8 \
	MOVQ D_XS(AX), R9 \
	XORQ R13, R13 \
half: \
	MOVQ D_SRC(AX), SI \
	MOVQ R13, DX \
	SHRQ $2, DX \
	ADDQ DX, SI \
	MOVQ D_X(AX), DI \
	ADDQ R13, DI

#define DACCPTR(s) \
	MOVQ D_ACC(AX), R10 \
	ADDQ R13, R10 \
	MOVQ D_ACCROW(AX), s

#define DTILE_TAIL(half) \
	ADDQ $32, R13 \
	CMPQ R13, $64 \
	JLT  half \
	VZEROUPPER \
	RET

// Lane accumulators. OP is LD (load) or ST (store); ROWn moves the
// accumulators of one row and n tokens, 64 bytes apart from p. ACCrxt moves
// a tile's r rows x t tokens: row 0 at p0, then NEXT(p0, p, s) points p at
// row 1 and each further row is s bytes on.
#define LD(r, m) VMOVUPD m, r
#define ST(r, m) VMOVUPD r, m

#define ROW1(OP, p, a) \
	OP(a, 0(p))

#define ROW2(OP, p, a, b) \
	OP(a, 0(p)) \
	OP(b, 64(p))

#define ROW3(OP, p, a, b, c) \
	OP(a, 0(p)) \
	OP(b, 64(p)) \
	OP(c, 128(p))

#define ROW4(OP, p, a, b, c, d) \
	OP(a, 0(p)) \
	OP(b, 64(p)) \
	OP(c, 128(p)) \
	OP(d, 192(p))

// NEXT of the tiles (row 1 at p = p0 + s) and of the dtiles (p = p0 += s)
#define LEAROW(p0, p, s) LEAQ (p0)(s*1), p
#define ADDROW(p0, p, s) ADDQ s, p

#define ACC3x4(OP, NEXT, p0, p, s) \
	ROW4(OP, p0, Y0, Y1, Y2, Y3) \
	NEXT(p0, p, s) \
	ROW4(OP, p, Y4, Y5, Y6, Y7) \
	ADDQ s, p \
	ROW4(OP, p, Y8, Y9, Y10, Y11)

#define ACC3x3(OP, NEXT, p0, p, s) \
	ROW3(OP, p0, Y0, Y1, Y2) \
	NEXT(p0, p, s) \
	ROW3(OP, p, Y3, Y4, Y5) \
	ADDQ s, p \
	ROW3(OP, p, Y6, Y7, Y8)

#define ACC4x3(OP, NEXT, p0, p, s) \
	ACC3x3(OP, NEXT, p0, p, s) \
	ADDQ s, p \
	ROW3(OP, p, Y9, Y10, Y11)

#define ACC6x2(OP, NEXT, p0, p, s) \
	ROW2(OP, p0, Y0, Y1) \
	NEXT(p0, p, s) \
	ROW2(OP, p, Y2, Y3) \
	ADDQ s, p \
	ROW2(OP, p, Y4, Y5) \
	ADDQ s, p \
	ROW2(OP, p, Y6, Y7) \
	ADDQ s, p \
	ROW2(OP, p, Y8, Y9) \
	ADDQ s, p \
	ROW2(OP, p, Y10, Y11)

#define ACC12x1(OP, NEXT, p0, p, s) \
	ROW1(OP, p0, Y0) \
	NEXT(p0, p, s) \
	ROW1(OP, p, Y1) \
	ADDQ s, p \
	ROW1(OP, p, Y2) \
	ADDQ s, p \
	ROW1(OP, p, Y3) \
	ADDQ s, p \
	ROW1(OP, p, Y4) \
	ADDQ s, p \
	ROW1(OP, p, Y5) \
	ADDQ s, p \
	ROW1(OP, p, Y6) \
	ADDQ s, p \
	ROW1(OP, p, Y7) \
	ADDQ s, p \
	ROW1(OP, p, Y8) \
	ADDQ s, p \
	ROW1(OP, p, Y9) \
	ADDQ s, p \
	ROW1(OP, p, Y10) \
	ADDQ s, p \
	ROW1(OP, p, Y11)

// Weights of one row (4 lanes) into a register, from memory operand m:
// decoded float64s (WF64, into Y15); MXFP4 words built to float64 by a
// broadcast and the a.ctrl shuffle at R8 (WMX into w, WMX15 into Y15); bf16
// words widened exactly (BF16W into x/y), prefetching PFD bytes ahead.
#define WF64(m) VMOVUPD m, Y15

#define WMX(m, w) \
	VPBROADCASTQ m, w \
	VPSHUFB (R8), w, w

#define WMX15(m) WMX(m, Y15)

#define BF16W(m, x, y) \
	PREFETCHT0 PFD m \
	BF16PD(m, x, y)

#define BF16W15(m) BF16W(m, X15, Y15)

// 3 rows (weights in Y12-Y14) x 4 or 3 tokens: each token's activations
// (memory operand m) into Y15 and multiplied with the 3 rows (TOK3).
#define TOK3(m, a, b, c) \
	VMOVUPD m, Y15 \
	VFMADD231PD Y15, Y12, a \
	VFMADD231PD Y15, Y13, b \
	VFMADD231PD Y15, Y14, c

// FMA3x4: the 4 tokens at off(DI), off(DI)(R9*1), off(DI)(R9*2) and
// off(R11)(R9*1) (R11 = DI + 2*R9); acc (row r, token t) in Y(4*r+t).
#define FMA3x4(off) \
	TOK3(off(DI), Y0, Y4, Y8) \
	TOK3(off(DI)(R9*1), Y1, Y5, Y9) \
	TOK3(off(DI)(R9*2), Y2, Y6, Y10) \
	TOK3(off(R11)(R9*1), Y3, Y7, Y11)

// FMA3x3: 3 tokens; acc (row r, token t) in Y(3*r+t).
#define FMA3x3(off) \
	TOK3(off(DI), Y0, Y3, Y6) \
	TOK3(off(DI)(R9*1), Y1, Y4, Y7) \
	TOK3(off(DI)(R9*2), Y2, Y5, Y8)

// 4 or 6 rows x 3 or 2 tokens: the tokens' activations at off(DI),
// off(DI)(R9*1)[, off(DI)(R9*2)] in Y12, Y13[, Y14], then for each row its
// weights into Y15 by W(m) and multiplied with the tokens (ROWxt).
#define ROWx3(a, b, c) \
	VFMADD231PD Y12, Y15, a \
	VFMADD231PD Y13, Y15, b \
	VFMADD231PD Y14, Y15, c

#define ROWx2(a, b) \
	VFMADD231PD Y12, Y15, a \
	VFMADD231PD Y13, Y15, b

// STEP4x3: acc (row r, token t) in Y(3*r+t).
#define STEP4x3(W, off, m0, m1, m2, m3) \
	VMOVUPD off(DI), Y12 \
	VMOVUPD off(DI)(R9*1), Y13 \
	VMOVUPD off(DI)(R9*2), Y14 \
	W(m0) \
	ROWx3(Y0, Y1, Y2) \
	W(m1) \
	ROWx3(Y3, Y4, Y5) \
	W(m2) \
	ROWx3(Y6, Y7, Y8) \
	W(m3) \
	ROWx3(Y9, Y10, Y11)

// STEP6x2: acc (row r, token t) in Y(2*r+t).
#define STEP6x2(W, off, m0, m1, m2, m3, m4, m5) \
	VMOVUPD off(DI), Y12 \
	VMOVUPD off(DI)(R9*1), Y13 \
	W(m0) \
	ROWx2(Y0, Y1) \
	W(m1) \
	ROWx2(Y2, Y3) \
	W(m2) \
	ROWx2(Y4, Y5) \
	W(m3) \
	ROWx2(Y6, Y7) \
	W(m4) \
	ROWx2(Y8, Y9) \
	W(m5) \
	ROWx2(Y10, Y11)

// MX12x1: one MXFP4 row's weights (word offset off of SI) into w, times
// the token in Y12, into acc.
#define MX12x1(off, w, acc) \
	WMX(off(SI), w) \
	VFMADD231PD w, Y12, acc

// STEP12x1MX: one 8-column step of tile12x1MXAVX2, the activations at
// x(DI), the rows' words from off(SI) on (576 bytes apart).
#define STEP12x1MX(x, off) \
	VMOVUPD x(DI), Y12 \
	MX12x1(off, Y13, Y0) \
	MX12x1(off+576, Y14, Y1) \
	MX12x1(off+1152, Y15, Y2) \
	MX12x1(off+1728, Y13, Y3) \
	MX12x1(off+2304, Y14, Y4) \
	MX12x1(off+2880, Y15, Y5) \
	MX12x1(off+3456, Y13, Y6) \
	MX12x1(off+4032, Y14, Y7) \
	MX12x1(off+4608, Y15, Y8) \
	MX12x1(off+5184, Y13, Y9) \
	MX12x1(off+5760, Y14, Y10) \
	MX12x1(off+6336, Y15, Y11)

// func tile3x4AVX2(a *tileArgs)
// 4 tiles of 3 rows x 4 tokens, each half of the lanes in turn; acc (row r,
// token t) in Y(4*r+t).
TEXT ·tile3x4AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	TILE_HEAD(tile3x4half, tile3x4tile, W64PTR)
	LEAQ (DI)(R9*2), R11
	MOVQ T_N(AX), CX
	ACC3x4(LD, LEAROW, BX, DX, R10)
tile3x4loop:
	VMOVUPD (SI), Y12
	VMOVUPD 2112(SI), Y13
	VMOVUPD 4224(SI), Y14
	FMA3x4(0)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, R11
	DECQ CX
	JNZ  tile3x4loop
	ACC3x4(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(3, tile3x4half, tile3x4tile)

// func tile4x3AVX2(a *tileArgs)
// 3 tiles of 4 rows x 3 tokens, each half of the lanes in turn; acc (row r,
// token t) in Y(3*r+t).
TEXT ·tile4x3AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	TILE_HEAD(tile4x3half, tile4x3tile, W64PTR)
	MOVQ T_N(AX), CX
	ACC4x3(LD, LEAROW, BX, DX, R10)
tile4x3loop:
	STEP4x3(WF64, 0, (SI), 2112(SI), 4224(SI), 6336(SI))
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  tile4x3loop
	ACC4x3(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(4, tile4x3half, tile4x3tile)

// func tile6x2AVX2(a *tileArgs)
// 2 tiles of 6 rows x 2 tokens, each half of the lanes in turn; acc (row r,
// token t) in Y(2*r+t).
TEXT ·tile6x2AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	TILE_HEAD(tile6x2half, tile6x2tile, W64PTR)
	MOVQ T_N(AX), CX
	ACC6x2(LD, LEAROW, BX, DX, R10)
tile6x2loop:
	STEP6x2(WF64, 0, (SI), 2112(SI), 4224(SI), 6336(SI), 8448(SI), 10560(SI))
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  tile6x2loop
	ACC6x2(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(6, tile6x2half, tile6x2tile)

// func tile12x1AVX2(a *tileArgs)
// 1 tiles of 12 rows x 1 token, each half of the lanes in turn; acc (row r,
// token t) in Y(r).
TEXT ·tile12x1AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	TILE_HEAD(tile12x1half, tile12x1tile, W64PTR)
	MOVQ T_N(AX), CX
	ACC12x1(LD, LEAROW, BX, DX, R10)
tile12x1loop:
	VMOVUPD (DI), Y12
	VFMADD231PD (SI), Y12, Y0
	VFMADD231PD 2112(SI), Y12, Y1
	VFMADD231PD 4224(SI), Y12, Y2
	VFMADD231PD 6336(SI), Y12, Y3
	VFMADD231PD 8448(SI), Y12, Y4
	VFMADD231PD 10560(SI), Y12, Y5
	VFMADD231PD 12672(SI), Y12, Y6
	VFMADD231PD 14784(SI), Y12, Y7
	VFMADD231PD 16896(SI), Y12, Y8
	VFMADD231PD 19008(SI), Y12, Y9
	VFMADD231PD 21120(SI), Y12, Y10
	VFMADD231PD 23232(SI), Y12, Y11
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  tile12x1loop
	ACC12x1(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(12, tile12x1half, tile12x1tile)

// func dtile3x4BF16AVX2(a *dtileArgs)
TEXT ·dtile3x4BF16AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	DTILE_HEAD(dtile3x4bf16half)
	LEAQ (DI)(R9*2), R11
	MOVQ D_N(AX), CX
	DACCPTR(R12)
	ACC3x4(LD, ADDROW, R10, R10, R12)
	LEAQ (DI)(R9*2), R11
dtile3x4bf16loop:
	BF16W((SI), X12, Y12)
	BF16W((SI)(R8*1), X13, Y13)
	BF16W((SI)(R8*2), X14, Y14)
	FMA3x4(0)
	ADDQ $16, SI
	ADDQ $64, DI
	ADDQ $64, R11
	DECQ CX
	JNZ  dtile3x4bf16loop
	DACCPTR(R12)
	ACC3x4(ST, ADDROW, R10, R10, R12)
	DTILE_TAIL(dtile3x4bf16half)

// func dtile3x3BF16AVX2(a *dtileArgs)
TEXT ·dtile3x3BF16AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	DTILE_HEAD(dtile3x3bf16half)
	MOVQ D_N(AX), CX
	DACCPTR(R11)
	ACC3x3(LD, ADDROW, R10, R10, R11)
dtile3x3bf16loop:
	BF16W((SI), X12, Y12)
	BF16W((SI)(R8*1), X13, Y13)
	BF16W((SI)(R8*2), X14, Y14)
	FMA3x3(0)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  dtile3x3bf16loop
	DACCPTR(R11)
	ACC3x3(ST, ADDROW, R10, R10, R11)
	DTILE_TAIL(dtile3x3bf16half)

// func dtile6x2BF16AVX2(a *dtileArgs)
// Rows 3-5 from R12 = SI + 3*a.stride.
TEXT ·dtile6x2BF16AVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	DTILE_HEAD(dtile6x2bf16half)
	LEAQ (SI)(R8*2), R12
	ADDQ R8, R12
	MOVQ D_N(AX), CX
	DACCPTR(R11)
	ACC6x2(LD, ADDROW, R10, R10, R11)
dtile6x2bf16loop:
	STEP6x2(BF16W15, 0, (SI), (SI)(R8*1), (SI)(R8*2), (R12), (R12)(R8*1), (R12)(R8*2))
	ADDQ $16, SI
	ADDQ $16, R12
	ADDQ $64, DI
	DECQ CX
	JNZ  dtile6x2bf16loop
	DACCPTR(R11)
	ACC6x2(ST, ADDROW, R10, R10, R11)
	DTILE_TAIL(dtile6x2bf16half)

// func decodeRowsBF16AVX2(a *decArgs) (finite bool)
// Decodes a.rows rows of a.n bf16 words (a.src, a.stride bytes apart) to
// w*2^-896 as float64 rows WS bytes apart at a.dst: each word is copied to
// bytes 6-7 of its qword (VPSHUFB, both lanes from one 16-byte broadcast),
// shifted right by 3 arithmetically in its high dword (sign, exponent and
// mantissa move to bits 63, 59-52 and 51-45) and the three copies of the
// sign below bit 63 are cleared. Every bf16 value, subnormals included, gives
// its exact float64 times 2^-896; an exponent of 255 (Inf, NaN) gives a
// finite number instead, so the routine reports whether it saw one. It
// prefetches the rows' successor block: 2*a.n bytes of each row from a.pf on.
TEXT ·decodeRowsBF16AVX2(SB), NOSPLIT, $0-9
	MOVQ a+0(FP), AX
	MOVQ 0(AX), SI
	MOVQ 8(AX), R8
	MOVQ 32(AX), R10
	MOVQ 48(AX), DI
	MOVQ 64(AX), R11
	VMOVDQU 72(AX), Y12
	VMOVDQU 104(AX), Y13
	VMOVDQU 136(AX), Y14
	VPBROADCASTQ 168(AX), X11
	VPXOR X10, X10, X10
decbfrow:
	MOVQ 56(AX), CX
	SHLQ $1, CX
	XORQ BX, BX
	XORQ DX, DX
decbfpf:
	PREFETCHT0 (R10)(DX*1)
	ADDQ $64, DX
	CMPQ DX, CX
	JLT  decbfpf
decbfloop:
	VBROADCASTI128 (SI)(BX*1), Y0
	VPSHUFB Y12, Y0, Y1
	VPSHUFB Y13, Y0, Y2
	VPSRAD $3, Y1, Y1
	VPSRAD $3, Y2, Y2
	VPAND Y14, Y1, Y1
	VPAND Y14, Y2, Y2
	VPAND X11, X0, X3
	VPCMPEQW X11, X3, X3
	VPOR X3, X10, X10
	VMOVUPD Y1, (DI)(BX*4)
	VMOVUPD Y2, 32(DI)(BX*4)
	ADDQ $16, BX
	CMPQ BX, CX
	JLT  decbfloop
	ADDQ R8, SI
	ADDQ R8, R10
	ADDQ $2112, DI
	DECQ R11
	JNZ  decbfrow
	VPTEST X10, X10
	SETEQ finite+8(FP)
	VZEROUPPER
	RET

// The MXFP4 tiles. MXFP4 is decoded to 16-bit words, the top 16 bits of
// each float64 E2M1[c]*2^(s-127) (the only bits it has: mxTopTab), in an
// even/odd order: per group of 32 elements, 64 bytes = the words of
// elements 0,2,..,14 | 1,3,..,15 | 16,18,..,30 | 17,19,..,31. The tiles
// walk half 0 = lanes 0,2,4,6 and half 1 = lanes 1,3,5,7 (16 bytes apart in
// each 32-byte pair of 8-column steps), against activations and lane
// accumulators in the same order (mxEOPerm), two steps per iteration; each
// 4 weights of a half are built as float64 in a register by an 8-byte
// broadcast and one VPSHUFB (a.ctrl = mxWordCtrl: word q to the top of
// qword q, the rest zero). Word rows are 576 bytes (bkWW words) apart.
// Otherwise they are tile4x3AVX2 and its kin.
// func tile4x3MXAVX2(a *tileArgs)
TEXT ·tile4x3MXAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	MOVQ T_CTRL(AX), R8
	TILE_HEAD(tile4x3MXhalf, tile4x3MXtile, WMXPTR)
	MOVQ T_N(AX), CX
	ACC4x3(LD, LEAROW, BX, DX, R10)
tile4x3MXloop:
	STEP4x3(WMX15, 0, (SI), 576(SI), 1152(SI), 1728(SI))
	STEP4x3(WMX15, 64, 8(SI), 584(SI), 1160(SI), 1736(SI))
	ADDQ $32, SI
	ADDQ $128, DI
	SUBQ $2, CX
	JNZ  tile4x3MXloop
	ACC4x3(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(4, tile4x3MXhalf, tile4x3MXtile)

TEXT ·tile6x2MXAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	MOVQ T_CTRL(AX), R8
	TILE_HEAD(tile6x2MXhalf, tile6x2MXtile, WMXPTR)
	MOVQ T_N(AX), CX
	ACC6x2(LD, LEAROW, BX, DX, R10)
tile6x2MXloop:
	STEP6x2(WMX15, 0, (SI), 576(SI), 1152(SI), 1728(SI), 2304(SI), 2880(SI))
	STEP6x2(WMX15, 64, 8(SI), 584(SI), 1160(SI), 1736(SI), 2312(SI), 2888(SI))
	ADDQ $32, SI
	ADDQ $128, DI
	SUBQ $2, CX
	JNZ  tile6x2MXloop
	ACC6x2(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(6, tile6x2MXhalf, tile6x2MXtile)

TEXT ·tile12x1MXAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	MOVQ T_CTRL(AX), R8
	TILE_HEAD(tile12x1MXhalf, tile12x1MXtile, WMXPTR)
	MOVQ T_N(AX), CX
	ACC12x1(LD, LEAROW, BX, DX, R10)
tile12x1MXloop:
	STEP12x1MX(0, 0)
	STEP12x1MX(64, 8)
	ADDQ $32, SI
	ADDQ $128, DI
	SUBQ $2, CX
	JNZ  tile12x1MXloop
	ACC12x1(ST, LEAROW, BX, DX, R10)
	TILE_TAIL(12, tile12x1MXhalf, tile12x1MXtile)

// DECPIECE runs up to st.k units of the decode st (R15 = st, a decState),
// from the labels dec, unit, decend and nodec: a unit is the 16 packed bytes
// broadcast to both lanes, the upper lane shifted right by 4 and both masked
// to nibbles (the codes of the even elements in lane 0, of the odd ones in
// lane 1), looked up in the scale's two byte tables (broadcast) and the byte
// pairs interleaved to words: exactly mxTable[s][c] >> 48, zeros for the NaN
// scale 255. Each new row prefetches the same row of the block after
// (st.pf, st.pfs).
#define DECPIECE(dec, unit, decend, nodec) \
	MOVQ 88(R15), CX \
	MOVQ 32(R15), DX \
	TESTQ DX, DX \
	JZ   nodec \
	MOVQ 0(R15), SI \
	MOVQ 8(R15), R14 \
	MOVQ 16(R15), DI \
	MOVQ 24(R15), R11 \
dec: \
	TESTQ R11, R11 \
	JNZ  unit \
	DECQ DX \
	JZ   decend \
	MOVQ 40(R15), SI \
	ADDQ 64(R15), SI \
	MOVQ SI, 40(R15) \
	MOVQ 48(R15), R14 \
	ADDQ 72(R15), R14 \
	MOVQ R14, 48(R15) \
	MOVQ 56(R15), DI \
	ADDQ $576, DI \
	MOVQ DI, 56(R15) \
	MOVQ 80(R15), R11 \
	MOVQ 104(R15), BX \
	ADDQ 64(R15), BX \
	MOVQ BX, 104(R15) \
	PREFETCHT0 (BX) \
	PREFETCHT0 64(BX) \
	MOVQ 112(R15), BX \
	ADDQ 72(R15), BX \
	MOVQ BX, 112(R15) \
	PREFETCHT0 (BX) \
unit: \
	MOVBQZX (R14), BX \
	SHLQ $5, BX \
	ADDQ 96(R15), BX \
	VBROADCASTI128 (SI), Y12 \
	VPSRLVQ mxeoshift<>(SB), Y12, Y12 \
	VPAND mxnibble<>(SB), Y12, Y12 \
	VBROADCASTI128 (BX), Y13 \
	VBROADCASTI128 16(BX), Y14 \
	VPSHUFB Y12, Y13, Y13 \
	VPSHUFB Y12, Y14, Y14 \
	VPUNPCKLBW Y14, Y13, Y15 \
	VPUNPCKHBW Y14, Y13, Y13 \
	VMOVDQU Y15, (DI) \
	VMOVDQU Y13, 32(DI) \
	ADDQ $16, SI \
	INCQ R14 \
	ADDQ $64, DI \
	DECQ R11 \
	DECQ CX \
	JNZ  dec \
decend: \
	MOVQ SI, 0(R15) \
	MOVQ R14, 8(R15) \
	MOVQ DI, 16(R15) \
	MOVQ R11, 24(R15) \
	MOVQ DX, 32(R15) \
nodec:

// func tile3x4MXAVX2(a *tileArgs)
// The MXFP4 3x4 tile; after each of its 8 3-row tiles (the lane
// accumulators stored) it also runs a piece of the decode a.dec (DECPIECE):
// up to a.dec.k units (32 weights of one row) of the next group into the
// other word buffer, so that the decode's shuffles overlap the
// multiply-adds of the next tile.
TEXT ·tile3x4MXAVX2(SB), NOSPLIT, $0-8
	MOVQ a+0(FP), AX
	MOVQ T_CTRL(AX), R8
	TILE_HEAD(tile3x4MXhalf, tile3x4MXtile, WMXPTR)
	LEAQ (DI)(R9*2), R11
	MOVQ T_N(AX), CX
	ACC3x4(LD, LEAROW, BX, DX, R10)
tile3x4MXloop:
	WMX((SI), Y12)
	WMX(576(SI), Y13)
	WMX(1152(SI), Y14)
	FMA3x4(0)
	WMX(8(SI), Y12)
	WMX(584(SI), Y13)
	WMX(1160(SI), Y14)
	FMA3x4(64)
	ADDQ $32, SI
	ADDQ $128, DI
	ADDQ $128, R11
	SUBQ $2, CX
	JNZ  tile3x4MXloop
	ACC3x4(ST, LEAROW, BX, DX, R10)
	MOVQ T_DEC(AX), R15
	DECPIECE(tile3x4MXdec, tile3x4MXunit, tile3x4MXdecend, tile3x4MXnodec)
	TILE_TAIL(3, tile3x4MXhalf, tile3x4MXtile)

DATA mxeoshift<>+0(SB)/8, $0
DATA mxeoshift<>+8(SB)/8, $0
DATA mxeoshift<>+16(SB)/8, $4
DATA mxeoshift<>+24(SB)/8, $4
GLOBL mxeoshift<>(SB), RODATA|NOPTR, $32
DATA mxnibble<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mxnibble<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mxnibble<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA mxnibble<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL mxnibble<>(SB), RODATA|NOPTR, $32

// func decPieceMXAVX2(st *decState)
// The decode piece of tile3x4MXAVX2 on its own: up to st.k units.
TEXT ·decPieceMXAVX2(SB), NOSPLIT, $0-8
	MOVQ st+0(FP), R15
	DECPIECE(decpiecedec, decpieceunit, decpiecedecend, decpiecenodec)
	VZEROUPPER
	RET
