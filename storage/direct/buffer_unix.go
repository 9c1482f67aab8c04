//go:build unix

package direct

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buffer is memory outside the Go heap, 2 MiB aligned, advised
// MADV_HUGEPAGE where the kernel supports it. It must be released with Free;
// the garbage collector does not see it.
type Buffer struct {
	b    []byte // the whole mapping, a multiple of HugePage bytes
	n    int    // bytes requested
	base unsafe.Pointer
	size uintptr // mapped bytes (b's length), for munmap
	huge bool
}

// AllocHuge maps at least n bytes of anonymous memory aligned to 2 MiB (the
// length is rounded up to 2 MiB) and advises transparent huge pages. It
// fails only when the mapping itself fails; Huge reports whether the advice
// was accepted.
func AllocHuge(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("direct: AllocHuge(%d): size must be positive", n)
	}
	size := (uintptr(n) + HugePage - 1) &^ (HugePage - 1)
	// Over-map by one huge page and trim both ends so the start is aligned.
	raw := size + HugePage
	p, err := unix.MmapPtr(-1, 0, nil, raw, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("direct: mmap %d bytes: %v (out of memory or a ulimit -v cap?)", raw, err)
	}
	start := uintptr(p)
	aligned := (start + HugePage - 1) &^ (HugePage - 1)
	if aligned > start {
		_ = unix.MunmapPtr(p, aligned-start)
	}
	head := aligned - start
	if tail := raw - head - size; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(p, head+size), tail)
	}
	base := unsafe.Add(p, head)
	b := unsafe.Slice((*byte)(base), int(size))
	buf := &Buffer{b: b, n: n, base: base, size: size}
	buf.huge = hugePages.Load() && adviseHuge(b)
	return buf, nil
}

// Bytes returns the first n bytes (the size asked for) of the buffer.
func (b *Buffer) Bytes() []byte { return b.b[:b.n:b.n] }

// Cap returns the whole mapping (n rounded up to 2 MiB), usable as scratch
// for aligned reads that run past n.
func (b *Buffer) Cap() []byte { return b.b }

// Huge reports whether madvise(MADV_HUGEPAGE) was accepted for the buffer.
// Whether the kernel actually backs it with huge pages also depends on the
// THP mode and on memory fragmentation.
func (b *Buffer) Huge() bool { return b.huge }

// Free unmaps the buffer. Using the buffer or any slice of it afterwards
// faults. Free is idempotent.
func (b *Buffer) Free() error {
	if b == nil || b.base == nil {
		return nil
	}
	err := unix.MunmapPtr(b.base, b.size)
	b.base, b.b = nil, nil
	if err != nil {
		return fmt.Errorf("direct: munmap: %v", err)
	}
	return nil
}

// pread is one pread(2) system call.
func pread(f *os.File, p []byte, off int64) (int, error) { return unix.Pread(int(f.Fd()), p, off) }

// pwrite is one pwrite(2) system call.
func pwrite(f *os.File, p []byte, off int64) (int, error) { return unix.Pwrite(int(f.Fd()), p, off) }
