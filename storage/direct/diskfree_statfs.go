//go:build linux || darwin || freebsd || dragonfly

package direct

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DiskFree returns the bytes an unprivileged user may still write in the
// filesystem holding dir, and the filesystem's size.
func DiskFree(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil
}
