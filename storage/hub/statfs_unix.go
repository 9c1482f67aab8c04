//go:build unix

package hub

import "golang.org/x/sys/unix"

// statFree returns the bytes an unprivileged user may still write in dir's
// filesystem, or -1 if unknown.
func statFree(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
