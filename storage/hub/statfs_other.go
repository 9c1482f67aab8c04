//go:build !unix

package hub

// statFree is unknown on this system: the download relies on the disk-full
// error instead of a pre-check.
func statFree(dir string) int64 { return -1 }
