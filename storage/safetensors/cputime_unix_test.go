//go:build unix

package safetensors

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time consumed by the process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
