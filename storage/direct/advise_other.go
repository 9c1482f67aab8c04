//go:build !linux

package direct

import (
	"errors"
	"os"
)

func dropCache(f *os.File) error { return errors.New("posix_fadvise is not available on this system") }
