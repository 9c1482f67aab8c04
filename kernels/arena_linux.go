package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// benchArena returns n bytes (a multiple of 8) for the benchmark weights:
// anonymous memory aligned to 2 MiB and advised MADV_HUGEPAGE, like the
// engine's pinned trunk and expert slots, so that the kernels and the read
// bandwidth they are compared with see the same pages as in a forward pass.
// free releases it. Without mmap it falls back to the Go heap.
func benchArena(n int) (b []byte, huge bool, free func()) {
	const align = 2 << 20
	m, err := unix.Mmap(-1, 0, n+align, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return heapArena(n)
	}
	off := 0
	if r := int(uintptrOf(m) % align); r != 0 {
		off = align - r
	}
	b = m[off : off+n : off+n]
	huge = unix.Madvise(b, unix.MADV_HUGEPAGE) == nil
	return b, huge, func() { _ = unix.Munmap(m) }
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
