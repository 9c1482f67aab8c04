//go:build !linux && !darwin

package machine

// PeakRSS is this process's largest resident set so far; this system does
// not report it to k3, so it is 0 (unknown).
func PeakRSS() int64 { return 0 }
