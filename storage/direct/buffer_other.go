//go:build !unix && !windows

package direct

import (
	"fmt"
	"io"
	"os"
	"unsafe"
)

// Buffer is 2 MiB-aligned memory. On this system it lives in the Go heap
// (no anonymous mmap / huge-page advice); Free drops the reference.
type Buffer struct {
	b []byte
	n int
}

// AllocHuge returns at least n bytes aligned to 2 MiB (length rounded up).
func AllocHuge(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("direct: AllocHuge(%d): size must be positive", n)
	}
	size := (n + HugePage - 1) &^ (HugePage - 1)
	raw := make([]byte, size+HugePage)
	off := int((HugePage - uintptr(unsafe.Pointer(&raw[0]))%HugePage) % HugePage)
	return &Buffer{b: raw[off : off+size : off+size], n: n}, nil
}

// Bytes returns the first n bytes of the buffer.
func (b *Buffer) Bytes() []byte { return b.b[:b.n:b.n] }

// Cap returns the whole buffer (n rounded up to 2 MiB).
func (b *Buffer) Cap() []byte { return b.b }

// Huge is always false here.
func (b *Buffer) Huge() bool { return false }

// Free releases the buffer.
func (b *Buffer) Free() error { b.b = nil; return nil }

func pread(f *os.File, p []byte, off int64) (int, error) {
	n, err := f.ReadAt(p, off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func pwrite(f *os.File, p []byte, off int64) (int, error) { return f.WriteAt(p, off) }
