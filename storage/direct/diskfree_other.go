//go:build !(linux || darwin || freebsd || dragonfly || windows)

package direct

import (
	"errors"
	"fmt"
)

// DiskFree is not implemented on this system: callers treat the free space
// as unknown.
func DiskFree(dir string) (free, total int64, err error) {
	return 0, 0, fmt.Errorf("free space of %s: %w", dir, errors.ErrUnsupported)
}
