//go:build !linux

package trunk

import "os"

// preallocate sets f's size (no reservation on this system).
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
