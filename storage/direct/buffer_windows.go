package direct

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Buffer is memory from VirtualAlloc, outside the Go heap, 2 MiB aligned:
// large pages (MEM_LARGE_PAGES) where the process may lock memory
// (SeLockMemoryPrivilege, granted by policy and enabled here), ordinary
// pages otherwise. It must be released with Free.
type Buffer struct {
	b    []byte
	n    int
	base uintptr // the allocation (reservation) to release
	huge bool
}

// largePages is whether MEM_LARGE_PAGES allocations may be tried: the
// privilege was enabled and the large page is HugePage. A refused
// allocation turns it off for the rest of the run.
var (
	largeOnce  sync.Once
	largePages atomic.Bool
)

// enableLargePages enables SeLockMemoryPrivilege in the process token if
// the account holds it (AdjustTokenPrivileges succeeds either way; the first
// large-page allocation tells whether it was held).
func enableLargePages() {
	if windows.GetLargePageMinimum() != HugePage {
		return
	}
	var tok windows.Token
	if windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ADJUST_PRIVILEGES|windows.TOKEN_QUERY, &tok) != nil {
		return
	}
	defer tok.Close()
	name, _ := windows.UTF16PtrFromString("SeLockMemoryPrivilege")
	var tp windows.Tokenprivileges
	if windows.LookupPrivilegeValue(nil, name, &tp.Privileges[0].Luid) != nil {
		return
	}
	tp.PrivilegeCount = 1
	tp.Privileges[0].Attributes = windows.SE_PRIVILEGE_ENABLED
	largePages.Store(windows.AdjustTokenPrivileges(tok, false, &tp, 0, nil, nil) == nil)
}

// AllocHuge returns at least n bytes aligned to 2 MiB (the length rounded
// up to 2 MiB). Huge reports whether they are large pages.
func AllocHuge(n int) (*Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("direct: AllocHuge(%d): size must be positive", n)
	}
	size := (uintptr(n) + HugePage - 1) &^ (HugePage - 1)
	largeOnce.Do(enableLargePages)
	if hugePages.Load() && largePages.Load() {
		p, err := windows.VirtualAlloc(0, size, windows.MEM_RESERVE|windows.MEM_COMMIT|windows.MEM_LARGE_PAGES, windows.PAGE_READWRITE)
		if err == nil && p%HugePage == 0 {
			return &Buffer{b: unsafe.Slice((*byte)(addr(p)), int(size)), n: n, base: p, huge: true}, nil
		}
		if err == nil {
			_ = windows.VirtualFree(p, 0, windows.MEM_RELEASE)
		}
		largePages.Store(false) // privilege not held, or no contiguous large pages left
	}
	// Reserve one huge page more than needed and commit the aligned part.
	res, err := windows.VirtualAlloc(0, size+HugePage, windows.MEM_RESERVE, windows.PAGE_NOACCESS)
	if err != nil {
		return nil, fmt.Errorf("direct: VirtualAlloc reserve %d bytes: %v (out of address space?)", size+HugePage, err)
	}
	aligned := (res + HugePage - 1) &^ (HugePage - 1)
	p, err := windows.VirtualAlloc(aligned, size, windows.MEM_COMMIT, windows.PAGE_READWRITE)
	if err != nil {
		_ = windows.VirtualFree(res, 0, windows.MEM_RELEASE)
		return nil, fmt.Errorf("direct: VirtualAlloc commit %d bytes: %v (out of memory or page file?)", size, err)
	}
	return &Buffer{b: unsafe.Slice((*byte)(addr(p)), int(size)), n: n, base: res}, nil
}

// addr is the memory at a, which VirtualAlloc gave (outside the Go heap, so
// it never moves); the indirection keeps go vet's uintptr check quiet.
func addr(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

// Bytes returns the first n bytes (the size asked for) of the buffer.
func (b *Buffer) Bytes() []byte { return b.b[:b.n:b.n] }

// Cap returns the whole buffer (n rounded up to 2 MiB).
func (b *Buffer) Cap() []byte { return b.b }

// Huge reports whether the buffer is backed by large pages.
func (b *Buffer) Huge() bool { return b.huge }

// Free releases the buffer; using it afterwards faults. Free is idempotent.
func (b *Buffer) Free() error {
	if b == nil || b.base == 0 {
		return nil
	}
	err := windows.VirtualFree(b.base, 0, windows.MEM_RELEASE)
	b.base, b.b = 0, nil
	if err != nil {
		return fmt.Errorf("direct: VirtualFree: %v", err)
	}
	return nil
}

// pread is one ReadFile at an offset (a synchronous handle: os.OpenFile
// opens none overlapped). os.File.ReadAt would loop over short reads, and
// after an unbuffered read that stops at the end of the file the next
// request starts off alignment and fails instead of reporting the end.
func pread(f *os.File, p []byte, off int64) (int, error) {
	var n uint32
	o := windows.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
	err := windows.ReadFile(windows.Handle(f.Fd()), p, &n, &o)
	if err == windows.ERROR_HANDLE_EOF {
		err = nil
	}
	return int(n), err
}

// pwrite is one WriteFile at an offset.
func pwrite(f *os.File, p []byte, off int64) (int, error) {
	var n uint32
	o := windows.Overlapped{Offset: uint32(off), OffsetHigh: uint32(off >> 32)}
	err := windows.WriteFile(windows.Handle(f.Fd()), p, &n, &o)
	return int(n), err
}
