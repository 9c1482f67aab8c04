package trunk

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves size bytes for f (so a pack does not run out of
// space half way), falling back to a plain size change when the
// filesystem cannot reserve.
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return f.Truncate(0)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err == nil {
		return nil
	}
	return f.Truncate(size)
}
