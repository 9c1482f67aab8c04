package machine

import "golang.org/x/sys/unix"

// PeakRSS is this process's largest resident set so far (getrusage
// ru_maxrss), 0 if unknown.
func PeakRSS() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss // bytes on macOS
}
