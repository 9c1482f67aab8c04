//go:build !linux

package direct

import (
	"errors"
	"os"
)

// adviseHuge: transparent huge pages are a Linux feature.
func adviseHuge(b []byte) bool { return false }

// directFlag is 0: this build does not open files with O_DIRECT (buffered
// reads, noted by File.Note).
const directFlag = 0

func dropCache(f *os.File) error { return errors.New("posix_fadvise is not available on this system") }
