package direct

import (
	"os"

	"golang.org/x/sys/unix"
)

// UncachedName is how this system bypasses the page cache.
const UncachedName = "F_NOCACHE"

// openUncached opens the file and turns its data caching off (F_NOCACHE:
// reads and writes of whole pages go between the device and the buffer)
// and read-ahead off (F_RDAHEAD 0: the engine reads what it needs, at the
// offsets it chooses). macOS has no O_DIRECT.
func openUncached(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_NOCACHE, 1); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fcntl F_NOCACHE", Path: path, Err: err}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_RDAHEAD, 0); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fcntl F_RDAHEAD", Path: path, Err: err}
	}
	return f, nil
}

func osRefuses(err error) bool { return false }

func diskFull(err error) bool { return false }
