package units

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:                 "0.00 B",
		999:               "999.00 B",
		1000:              "1.00 KB",
		831_488:           "831.49 KB",
		2_400_000:         "2.40 MB",
		40e9:              "40.00 GB",
		1_560_936_091_448: "1.56 TB",
		5e15:              "5000.00 TB",
		-2_500_000:        "-2.50 MB",
	} {
		assert.Equal(t, want, Bytes(n), "Bytes(%d)", n)
	}
	assert.Equal(t, "25.00 MB/s", PerSec(25e6))
	assert.Equal(t, "0.00 B/s", PerSec(0))
}

func TestMeter(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var m Meter
	assert.Zero(t, m.Rate(t0), "no samples")
	m.Observe(t0, 500)
	assert.Zero(t, m.Rate(t0), "one sample")

	// 100 bytes a second for 4 s
	for i := 1; i <= 4; i++ {
		m.Observe(t0.Add(time.Duration(i)*time.Second), 500+int64(i)*100)
	}
	now := t0.Add(4 * time.Second)
	assert.Equal(t, 100.0, m.Rate(now))

	// a burst within 100 ms updates the last sample
	m.Observe(now.Add(50*time.Millisecond), 1000)
	assert.Len(t, m.s, 5)
	assert.InDelta(t, 500/4.05, m.Rate(now.Add(50*time.Millisecond)), 1e-9)

	// a burst at the first sample moves the base: 100 bytes then 300 at
	// the same instant, then 400 a second
	var b Meter
	b.Observe(t0, 100)
	b.Observe(t0, 400)
	for i := 1; i <= 3; i++ {
		b.Observe(t0.Add(time.Duration(i)*time.Second), 400+int64(i)*400)
	}
	assert.Equal(t, 400.0, b.Rate(t0.Add(3*time.Second)))

	// samples older than the window are dropped (two are always kept)
	var w Meter
	for i := 0; i <= 20; i++ {
		w.Observe(t0.Add(time.Duration(i)*time.Second), int64(i)*1000)
	}
	assert.Equal(t, t0.Add(12*time.Second), w.s[0].t)
	assert.Equal(t, 1000.0, w.Rate(t0.Add(20*time.Second)))

	// stalled: nothing for a window
	assert.Zero(t, w.Rate(t0.Add(29*time.Second)))

	w.Reset()
	assert.Zero(t, w.Rate(t0.Add(20*time.Second)))
}

func TestETA(t *testing.T) {
	assert.Equal(t, 4*time.Second, ETA(400, 100))
	assert.Equal(t, time.Duration(0), ETA(0, 0))
	assert.Equal(t, time.Duration(0), ETA(-5, 100))
	assert.Equal(t, time.Duration(-1), ETA(1, 0))
}

// TestDigits: a plain run of ASCII digits only; a sign, a space, an
// underscore, another script's digits or nothing at all is not one.
func TestDigits(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "0042": true, "123456789": true, "": false, "-1": false, "+1": false,
		" 1": false, "1 ": false, "1_000": false, "1.5": false, "١٢": false, "0x1": false} {
		assert.Equal(t, want, Digits(s), "%q", s)
	}
}
