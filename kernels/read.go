package kernels

import "unsafe"

// ReadBlock reads every byte of b as fast as this machine can and returns
// the XOR of its little-endian uint64 words (so the loads cannot be
// elided):
//
//	var h uint64
//	for i := 0; i < len(b); i += 8 {
//		h ^= binary.LittleEndian.Uint64(b[i:])
//	}
//	return h
//
// len(b) is a positive multiple of 512. On AVX-512 it reads 8 concurrent
// prefetched streams, the access pattern of a mat-vec with 8 rows in
// flight, so a read bandwidth measured with it is the limit the mat-vec
// kernels are compared with.
func ReadBlock(b []byte) uint64 { return readBlock(b) }

// readGo is the portable read loop: 8 independent 64-bit streams.
func readGo(b []byte) uint64 {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
	var a [8]uint64
	for i := 0; i+8 <= len(w); i += 8 {
		a[0] ^= w[i]
		a[1] ^= w[i+1]
		a[2] ^= w[i+2]
		a[3] ^= w[i+3]
		a[4] ^= w[i+4]
		a[5] ^= w[i+5]
		a[6] ^= w[i+6]
		a[7] ^= w[i+7]
	}
	return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7]
}
