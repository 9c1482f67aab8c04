//go:build !linux

package kernels

// benchArena returns n bytes from the Go heap (huge pages are requested on
// Linux only).
func benchArena(n int) (b []byte, huge bool, free func()) { return heapArena(n) }
