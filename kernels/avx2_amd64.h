// Macros shared by the AVX2 kernels (simd_avx2_amd64.s, batch_avx2_amd64.s,
// bf16c_avx2_amd64.s).

// software prefetch distance ahead of a row's current position (bytes)
#define PFD 1024

// ZEROACC8 clears Y0-Y7, the lane accumulators of the row kernels;
// STOREACC8 stores them to the 256 bytes at p.
#define ZEROACC8 \
	VXORPD Y0, Y0, Y0 \
	VXORPD Y1, Y1, Y1 \
	VXORPD Y2, Y2, Y2 \
	VXORPD Y3, Y3, Y3 \
	VXORPD Y4, Y4, Y4 \
	VXORPD Y5, Y5, Y5 \
	VXORPD Y6, Y6, Y6 \
	VXORPD Y7, Y7, Y7

#define STOREACC8(p) \
	VMOVUPD Y0, 0(p) \
	VMOVUPD Y1, 32(p) \
	VMOVUPD Y2, 64(p) \
	VMOVUPD Y3, 96(p) \
	VMOVUPD Y4, 128(p) \
	VMOVUPD Y5, 160(p) \
	VMOVUPD Y6, 192(p) \
	VMOVUPD Y7, 224(p)

// BF16PD widens the 4 bf16 words at m exactly to float64 in y: each word
// moved to the top of a 32-bit lane of x (y's X register; the word's
// float32) by VPMOVZXWD and a 16-bit shift, then VCVTPS2PD.
#define BF16PD(m, x, y) \
	VPMOVZXWD m, x \
	VPSLLD $16, x, x \
	VCVTPS2PD x, y
