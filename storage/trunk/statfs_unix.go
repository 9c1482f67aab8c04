//go:build unix

package trunk

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statFree returns the bytes an unprivileged user may still write in dir's
// filesystem, or -1 if unknown.
func statFree(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// allocated returns the bytes of disk space path occupies (0 if missing).
func allocated(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
