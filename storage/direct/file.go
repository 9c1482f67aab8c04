package direct

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"k3/storage/regfile"
)

// File is an open file read (or written) with O_DIRECT where the filesystem
// allows it, buffered otherwise. Safe for concurrent ReadAt.
type File struct {
	path string
	cur  atomic.Pointer[os.File] // descriptor in use
	dio  atomic.Bool             // cur was opened with O_DIRECT
	mu   sync.Mutex              // guards the fallback switch, note and closed
	old  []*os.File              // descriptors replaced by a fallback, closed by Close
	note string
	flag int
	perm os.FileMode

	// preadFn / pwriteFn are single system calls; tests replace them to
	// inject EIO, short reads and O_DIRECT refusals.
	preadFn  func(f *os.File, p []byte, off int64) (int, error)
	pwriteFn func(f *os.File, p []byte, off int64) (int, error)
}

// openFn opens a file buffered and openUncachedFn bypassing the page cache
// (O_DIRECT, F_NOCACHE or FILE_FLAG_NO_BUFFERING: see UncachedName); tests
// replace them to imitate filesystems that refuse it.
var (
	openFn         = os.OpenFile
	openUncachedFn = openUncached
)

// ErrNoUncached is OpenUncached's answer on a system without uncached file
// I/O.
var ErrNoUncached = fmt.Errorf("no uncached file I/O on this system: %w", errors.ErrUnsupported)

// OpenUncached opens path like os.OpenFile, bypassing the page cache: with
// O_DIRECT on Linux, F_NOCACHE and read-ahead off on macOS,
// FILE_FLAG_NO_BUFFERING on Windows, ErrNoUncached elsewhere. Its reads and
// writes must be aligned (Aligned) on Linux and Windows. RefusesUncached
// tells a filesystem's refusal from a real failure.
func OpenUncached(path string, flag int, perm os.FileMode) (*os.File, error) {
	return openUncachedFn(path, flag, perm)
}

// Open opens path read-only, bypassing the page cache if the filesystem
// allows it. It fails when the file cannot be opened at all, and for
// anything but a regular file (opening a named pipe would block forever).
func Open(path string) (*File, error) {
	if err := regfile.Check(path); err != nil {
		return nil, openError(path, err)
	}
	return open(path, os.O_RDONLY, 0)
}

// Create creates a new file (it must not exist) for reading and writing,
// bypassing the page cache if the filesystem allows it. Writes to such a
// file must be aligned (see WriteAt).
func Create(path string) (*File, error) {
	return open(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

func open(path string, flag int, perm os.FileMode) (*File, error) {
	f := &File{path: path, flag: flag, perm: perm, preadFn: pread, pwriteFn: pwrite}
	fd, err := openUncachedFn(path, flag, perm)
	switch {
	case err == nil:
		f.cur.Store(fd)
		f.dio.Store(true)
		return f, nil
	case errors.Is(err, errors.ErrUnsupported):
		f.note = "this system has no uncached reads: buffered reads through the page cache"
	case RefusesUncached(err):
		if flag&os.O_EXCL != 0 {
			// Some filesystems create the file and then refuse O_DIRECT;
			// with O_EXCL anything at path now is ours.
			_ = os.Remove(path)
		}
		f.note = fmt.Sprintf("%s refused by the filesystem (%v): buffered reads through the page cache", UncachedName, unwrapSys(err))
	default:
		return nil, openError(path, err)
	}
	fd, err = openFn(path, flag, perm)
	if err != nil {
		return nil, openError(path, err)
	}
	f.cur.Store(fd)
	return f, nil
}

func openError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("open %s: %w", path, err)
}

func unwrapSys(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// RefusesUncached reports whether an open, read or write error means "this
// filesystem does not do uncached I/O" rather than a real failure.
func RefusesUncached(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP) || osRefuses(err)
}

// DiskFull reports whether a write error means the disk is full (ENOSPC or
// EDQUOT; ERROR_DISK_FULL or ERROR_HANDLE_DISK_FULL on Windows).
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || diskFull(err)
}

// Path returns the file name given to Open or Create.
func (f *File) Path() string { return f.path }

// Direct reports whether reads currently bypass the page cache.
func (f *File) Direct() bool { return f.dio.Load() }

// Note explains why the file is not direct ("" when it is).
func (f *File) Note() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.note
}

// Size returns the file's current size.
func (f *File) Size() (int64, error) {
	st, err := f.cur.Load().Stat()
	if err != nil {
		return -1, fmt.Errorf("stat %s: %w", f.path, unwrapSys(err))
	}
	return st.Size(), nil
}

// Aligned reports whether a request can go to the device as is: offset,
// length and destination address all multiples of Align.
func Aligned(p []byte, off int64) bool {
	if off%Align != 0 || len(p)%Align != 0 {
		return false
	}
	return len(p) == 0 || uintptr(unsafe.Pointer(&p[0]))%Align == 0
}

// fallback switches the file to buffered I/O after the filesystem refused
// an O_DIRECT request (EINVAL on read: accepted at open, refused at I/O).
func (f *File) fallback(bad *os.File, cause error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur.Load() != bad { // another goroutine already switched
		return nil
	}
	fd, err := openFn(f.path, f.flag&^(os.O_CREATE|os.O_EXCL), f.perm)
	if err != nil {
		return openError(f.path, err)
	}
	f.old = append(f.old, bad)
	f.cur.Store(fd)
	f.dio.Store(false)
	f.note = fmt.Sprintf("%s I/O refused by the filesystem (%v): buffered reads through the page cache", UncachedName, cause)
	return nil
}

// rawRead fills p from off with as many system calls as needed. It stops
// early at end of file and returns what arrived with io.ErrUnexpectedEOF.
// On an O_DIRECT refusal it switches the file to buffered I/O and retries.
func (f *File) rawRead(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		fd := f.cur.Load()
		dio := f.dio.Load()
		c := min(len(p)-done, MaxIO)
		n, err := f.preadFn(fd, p[done:done+c], off+int64(done))
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if dio && RefusesUncached(err) && Aligned(p[done:done+c], off+int64(done)) {
				if ferr := f.fallback(fd, err); ferr != nil {
					return done, ferr
				}
				continue
			}
			return done, err
		}
		if n <= 0 {
			return done, io.ErrUnexpectedEOF
		}
		done += n
		if dio && n%Align != 0 && done < len(p) {
			// A direct read that ends off alignment stopped at end of file.
			return done, io.ErrUnexpectedEOF
		}
	}
	return done, nil
}

// ReadAt reads len(p) bytes at off (io.ReaderAt). Any offset, length and
// destination work: aligned requests into aligned memory go straight to the
// device; others read the covering 4096-aligned span through a pooled
// huge-page bounce buffer. A request that cannot be filled completely
// returns a *ReadError (never a silently short read).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &ReadError{Path: f.path, Off: off, Len: len(p), Size: -1, Err: errors.New("negative offset")}
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if !f.dio.Load() || Aligned(p, off) {
		n, err = f.rawRead(p, off)
	} else {
		n, err = f.readBounce(p, off)
	}
	if err != nil {
		size, _ := f.Size()
		return n, &ReadError{Path: f.path, Off: off, Len: len(p), Got: n, Size: size, Err: err}
	}
	return n, nil
}

// BounceSize is the size of the pooled buffers used for unaligned reads.
const BounceSize = 8 << 20

var bouncePool = make(chan *Buffer, 16)

func getBounce() (*Buffer, error) {
	select {
	case b := <-bouncePool:
		return b, nil
	default:
		return AllocHuge(BounceSize)
	}
}

func putBounce(b *Buffer) {
	select {
	case bouncePool <- b:
	default:
		_ = b.Free()
	}
}

func (f *File) readBounce(p []byte, off int64) (int, error) {
	bb, err := getBounce()
	if err != nil {
		return 0, err
	}
	defer putBounce(bb)
	buf := bb.Cap()[:BounceSize]
	done := 0
	for done < len(p) {
		if !f.dio.Load() { // switched to buffered meanwhile: read the rest directly
			n, err := f.rawRead(p[done:], off+int64(done))
			return done + n, err
		}
		pos := off + int64(done)
		lo := AlignDown(pos)
		skip := int(pos - lo)
		want := int(min(AlignUp(int64(skip+len(p)-done)), int64(len(buf))))
		n, rerr := f.rawRead(buf[:want], lo)
		if n > skip {
			done += copy(p[done:], buf[skip:n])
		}
		if done == len(p) {
			return done, nil
		}
		if rerr != nil {
			return done, rerr
		}
	}
	return done, nil
}

// WriteAt writes p at off. On an O_DIRECT file the offset, length and
// address of p must be multiples of Align (ErrUnaligned otherwise): write
// from a Buffer. A buffered file accepts anything.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if f.dio.Load() && !Aligned(p, off) {
		return 0, &WriteError{Path: f.path, Off: off, Len: len(p), Err: ErrUnaligned}
	}
	done := 0
	for done < len(p) {
		fd := f.cur.Load()
		c := min(len(p)-done, MaxIO)
		n, err := f.pwriteFn(fd, p[done:done+c], off+int64(done))
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if DiskFull(err) {
				err = fmt.Errorf("%w: the disk is full", err)
			}
			return done, &WriteError{Path: f.path, Off: off, Len: len(p), Err: err}
		}
		if n <= 0 {
			return done, &WriteError{Path: f.path, Off: off, Len: len(p), Err: io.ErrShortWrite}
		}
		done += n
	}
	return done, nil
}

// Sync flushes written data to the device (fsync).
func (f *File) Sync() error {
	if err := f.cur.Load().Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.path, unwrapSys(err))
	}
	return nil
}

// DropCache asks the kernel to evict the file's pages from the page cache
// (posix_fadvise DONTNEED). Dirty pages are not evicted: Sync first.
func (f *File) DropCache() error {
	if err := dropCache(f.cur.Load()); err != nil {
		return fmt.Errorf("fadvise %s: %w", f.path, err)
	}
	return nil
}

// Close closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	old := f.old
	f.old = nil
	f.mu.Unlock()
	for _, o := range old {
		_ = o.Close()
	}
	if err := f.cur.Load().Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.path, unwrapSys(err))
	}
	return nil
}
