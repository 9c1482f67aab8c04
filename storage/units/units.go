// Package units formats byte counts and rates the one way k3 shows them,
// and measures transfer rates for progress reports (downloads, packing).
package units

import (
	"fmt"
	"math"
	"time"
)

// Bytes renders a byte count in decimal units (1 KB = 1000 bytes) with two
// decimals: "0.00 B", "831.49 KB", "1.56 TB".
func Bytes(n int64) string { return bytesF(float64(n)) }

// PerSec renders a rate in bytes per second: "25.00 MB/s".
func PerSec(bytesPerSec float64) string { return bytesF(bytesPerSec) + "/s" }

func bytesF(f float64) string {
	units := [...]string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for math.Abs(f) >= 1000 && i < len(units)-1 {
		f /= 1000
		i++
	}
	return fmt.Sprintf("%.2f %s", f, units[i])
}

// Window is how far back a Meter's rate looks.
const Window = 8 * time.Second

// coalesce is the spacing below which a Meter merges samples.
const coalesce = 100 * time.Millisecond

// Meter turns a growing byte count into a rate: bytes per second over the
// last Window, 0 when the count has not moved for a Window (stalled). The
// zero Meter is ready; it is not safe for concurrent use.
type Meter struct {
	s []sample
}

type sample struct {
	t time.Time
	n int64 // the count at t
}

// Observe records that the count is n (bytes so far, not an increment) at
// now. Samples closer than 100 ms to the previous one update it instead of
// adding one, so a burst of small writes costs nothing. A burst at the
// first sample moves the base: when its bytes started moving is unknown.
func (m *Meter) Observe(now time.Time, n int64) {
	if k := len(m.s); k > 0 && now.Sub(m.s[k-1].t) < coalesce {
		m.s[k-1].n = n
		if k > 1 {
			return
		}
	}
	m.s = append(m.s, sample{now, n})
	i := 0
	for i < len(m.s)-2 && now.Sub(m.s[i].t) > Window {
		i++
	}
	if i > 0 {
		m.s = append(m.s[:0], m.s[i:]...)
	}
}

// Reset forgets every sample (the count restarted, or jumped without a
// transfer, as when a resumed file is found).
func (m *Meter) Reset() { m.s = m.s[:0] }

// Rate returns the bytes per second over the samples of the last Window,
// measured up to now; 0 with fewer than two samples or when stalled.
func (m *Meter) Rate(now time.Time) float64 {
	if len(m.s) < 2 {
		return 0
	}
	first, last := m.s[0], m.s[len(m.s)-1]
	if now.Sub(last.t) > Window {
		return 0
	}
	dt := now.Sub(first.t).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(last.n-first.n) / dt
}

// ETA returns the time left for remaining bytes at bytesPerSec: 0 when
// nothing remains, -1 when the rate is unknown (0).
func ETA(remaining int64, bytesPerSec float64) time.Duration {
	if remaining <= 0 {
		return 0
	}
	if bytesPerSec <= 0 {
		return -1
	}
	return time.Duration(float64(remaining) / bytesPerSec * float64(time.Second))
}

// Digits reports whether s is a non-empty run of ASCII digits 0-9: a count
// written in decimal, with no sign, space or underscore (as a flag value, a
// process id in a file name, a shard number).
func Digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
