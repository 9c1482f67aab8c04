//go:build unix

package trunk

import (
	"os"
	"syscall"
)

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
