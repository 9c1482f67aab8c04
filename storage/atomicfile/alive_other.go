//go:build !unix && !windows

package atomicfile

// Without a way to ask, every writer counts as running: nothing is removed.
func processAlive(int) bool { return true }
