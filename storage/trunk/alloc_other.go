//go:build !unix

package trunk

import "os"

// allocated returns path's size (0 if missing).
func allocated(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
