//go:build !linux

package trunk

import "os"

// oDirect is 0: this build writes through the page cache.
const oDirect = 0

// preallocate sets f's size (no reservation on this system).
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
