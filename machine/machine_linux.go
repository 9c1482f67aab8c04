package machine

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func readMemory() (Memory, error) { return ReadMemoryFS(os.DirFS("/")) }

func readCPU() CPU { return ReadCPUFS(os.DirFS("/")) }

// RSS is this process's resident set size now (VmRSS), 0 if unknown.
func RSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}

// PeakRSS is this process's largest resident set so far (getrusage
// ru_maxrss), 0 if unknown.
func PeakRSS() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}
