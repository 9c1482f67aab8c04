package direct

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// DiskFree returns the bytes the current user may still write in the volume
// holding dir, and the volume's size.
func DiskFree(dir string) (free, total int64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	var avail, size, all uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &size, &all); err != nil {
		return 0, 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(avail), int64(size), nil
}
