// Macros shared by the NEON kernels (simd_neon_arm64.s, bf16c_neon_arm64.s).
// Go's assembler orders operands sources first, destination last (VFMLA
// Vm, Vn, Vd is Vd += Vn*Vm; VZIP1 Vm, Vn, Vd is zip1 Vd, Vn, Vm).

// Instructions Go's assembler lacks, encoded by hand (n, m sources, d
// destination, all register numbers): FCVTL/FCVTL2 widen the low/high two
// float32 of Vn to 2 x float64; FCVTN/FCVTN2 round 2 x float64 to the
// low/high two float32 of Vd (FCVTN zeroes the high half); FMULD2/FADDD2
// are the 2 x float64 vector multiply and add.
#define FCVTL(n, d) WORD $(0x0E617800 | ((n)<<5) | (d))
#define FCVTL2(n, d) WORD $(0x4E617800 | ((n)<<5) | (d))
#define FCVTN(n, d) WORD $(0x0E616800 | ((n)<<5) | (d))
#define FCVTN2(n, d) WORD $(0x4E616800 | ((n)<<5) | (d))
#define FMULD2(m, n, d) WORD $(0x6E60DC00 | ((m)<<16) | ((n)<<5) | (d))
#define FADDD2(m, n, d) WORD $(0x4E60D400 | ((m)<<16) | ((n)<<5) | (d))

// WIDEN4: the 8 float32 of registers n (elements 0-3) and m (4-7) widened,
// exactly, to 2 x float64 in registers d..d+3.
#define WIDEN4(n, m, d) \
	FCVTL(n, d); \
	FCVTL2(n, d+1); \
	FCVTL(m, d+2); \
	FCVTL2(m, d+3)

// ZIPH: the 8 bf16 words of w moved to the top of 32-bit lanes (ZIP with
// the zero V31), words 0-3 in lo and 4-7 in hi: each word's float32,
// exactly.
#define ZIPH(w, lo, hi) \
	VZIP1 w.H8, V31.H8, lo.H8; \
	VZIP2 w.H8, V31.H8, hi.H8

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16

// ZERO16 clears V0-V15; STORE16 stores them to 256 bytes at p (p advanced
// by 192).
#define ZERO16 \
	ZERO4(V0, V1, V2, V3); \
	ZERO4(V4, V5, V6, V7); \
	ZERO4(V8, V9, V10, V11); \
	ZERO4(V12, V13, V14, V15)

#define STORE16(p) \
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(p); \
	VST1.P [V4.D2, V5.D2, V6.D2, V7.D2], 64(p); \
	VST1.P [V8.D2, V9.D2, V10.D2, V11.D2], 64(p); \
	VST1 [V12.D2, V13.D2, V14.D2, V15.D2], (p)
