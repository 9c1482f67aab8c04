// Package direct reads (and, for probes, writes) files with O_DIRECT into
// huge-page-backed buffers, the way the engine streams weights from NVMe.
//
// Why: O_DIRECT reads into 2 MiB-aligned anonymous memory advised
// MADV_HUGEPAGE run at the disk's ceiling, the same reads into ordinary
// 4 KiB pages fall well short of it, and buffered reads spend far more CPU
// time per byte (the development machines' measurements are in
// docs/BENCHMARKS.md). So:
//
//   - AllocHuge returns a Buffer outside the Go heap: anonymous mmap, 2 MiB
//     aligned, madvise(MADV_HUGEPAGE). Free it explicitly.
//   - Open opens a file with O_DIRECT and falls back to ordinary buffered I/O
//     when the filesystem refuses it (tmpfs on older kernels, some FUSE and
//     network filesystems, non-Linux systems). It never fails because of
//     O_DIRECT; File.Direct and File.Note say what happened.
//   - File.ReadAt accepts any offset, length and destination. When all three
//     are 4096-aligned (Aligned reports it) the bytes go straight from the
//     device into the destination; otherwise the covering aligned span is read
//     into a pooled huge-page bounce buffer and the requested bytes copied out.
//     Callers that care about speed pass aligned arguments and Buffer memory.
//   - Every short read, truncated file or I/O error comes back as a *ReadError
//     naming the file, offset and length; there is never a silently short
//     result. errors.Is(err, io.ErrUnexpectedEOF) identifies truncation,
//     errors.Is(err, syscall.EIO) a device error.
//
// A File is safe for concurrent ReadAt calls (the engine reads experts at
// queue depth > 1 from one descriptor).
package direct

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// hugePages is whether AllocHuge advises transparent huge pages (see
// SetHugePages).
var hugePages atomic.Bool

func init() { hugePages.Store(true) }

// SetHugePages turns the huge-page advice of the buffers AllocHuge maps
// from then on on or off (the C engine's K3_NOHUGE turns it off). The
// buffers stay 2 MiB aligned either way.
func SetHugePages(on bool) { hugePages.Store(on) }

// Align is the offset, length and address alignment O_DIRECT needs. 4096
// covers both 512-byte and 4 KiB logical-block devices.
const Align = 4096

// HugePage is the transparent huge page size buffers are aligned to.
const HugePage = 2 << 20

// MaxIO caps one read or write system call (macOS pread fails for requests
// of 2 GiB or more); longer requests loop.
const MaxIO = 1 << 30

// AlignDown rounds x down to a multiple of Align.
func AlignDown(x int64) int64 { return x &^ (Align - 1) }

// AlignUp rounds x up to a multiple of Align.
func AlignUp(x int64) int64 { return (x + Align - 1) &^ (Align - 1) }

// ReadError is returned for every failed or short read. It names the file,
// the requested offset and length, and how many bytes arrived.
type ReadError struct {
	Path string
	Off  int64 // requested offset
	Len  int   // requested length
	Got  int   // bytes delivered before the failure
	Size int64 // file size when the error was seen, -1 if unknown
	Err  error // io.ErrUnexpectedEOF for truncation, or the system call error
}

func (e *ReadError) Error() string {
	if errors.Is(e.Err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("read %s at offset %d length %d: only %d bytes available (file is %d bytes; truncated or wrong file? re-download or re-verify it)",
			e.Path, e.Off, e.Len, e.Got, e.Size)
	}
	return fmt.Sprintf("read %s at offset %d length %d: %v after %d bytes (device or filesystem error; check dmesg and re-verify the file)",
		e.Path, e.Off, e.Len, e.Err, e.Got)
}

func (e *ReadError) Unwrap() error { return e.Err }

// WriteError is returned for a failed or short write.
type WriteError struct {
	Path string
	Off  int64
	Len  int
	Err  error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("write %s at offset %d length %d: %v", e.Path, e.Off, e.Len, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// ErrUnaligned is returned by WriteAt on an O_DIRECT file when the offset,
// length or buffer address is not a multiple of Align.
var ErrUnaligned = errors.New("O_DIRECT write needs offset, length and buffer address aligned to 4096 bytes (use AllocHuge)")
