package doctor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPrefillClock: the passes and time left of a prompt's reading at the
// mean time of its passes, carried to the next prompt.
func TestPrefillClock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var c PrefillClock
	c.Reset()
	assert.Equal(t, PrefillStatus{Total: 4979}, c.Observe(0, 4979, 0, 0, at(0)), "before the pass size is said: nothing to estimate")
	// one pass of 512 in 20 s: 9 more at 20 s
	assert.Equal(t, PrefillStatus{Done: 512, Total: 4979, Pass: 1, Passes: 10, Elapsed: 20, Left: 180}, c.Observe(512, 4979, 0, 512, at(20)))
	// a step of 9 passes' positions counts 9 passes: 190 s over 10
	assert.Equal(t, PrefillStatus{Done: 4979, Total: 4979, Pass: 10, Passes: 10, Elapsed: 190}, c.Observe(4979, 4979, 0, 512, at(190)))
	assert.Equal(t, 19.0, c.PassSeconds)

	// the next prompt starts from the last one's pass time
	c.Reset()
	assert.Equal(t, PrefillStatus{Done: 300, Total: 1324, Reused: 300, Passes: 2, Left: 38}, c.Observe(300, 1324, 300, 0, at(200)))
	assert.Equal(t, PrefillStatus{Done: 812, Total: 1324, Reused: 300, Pass: 1, Passes: 2, Elapsed: 10, Left: 10}, c.Observe(812, 1324, 300, 0, at(210)))

	// begun before the first pass: the first pass is timed from then, from
	// the reused positions; a short pass (a split at a kept prefix) is one
	c.Begin(at(300))
	assert.Equal(t, PrefillStatus{Done: 105, Total: 120, Reused: 100, Pass: 1, Passes: 3, Elapsed: 4, Left: 8}, c.Observe(105, 120, 100, 8, at(304)))
	assert.Equal(t, PrefillStatus{Done: 113, Total: 120, Reused: 100, Pass: 2, Passes: 3, Elapsed: 6, Left: 3}, c.Observe(113, 120, 100, 8, at(306)))
	assert.Equal(t, PrefillStatus{Done: 120, Total: 120, Reused: 100, Pass: 3, Passes: 3, Elapsed: 9}, c.Observe(120, 120, 100, 8, at(309)))
	assert.Equal(t, 3.0, c.PassSeconds)

	// not begun: the clock starts at the first report, whose pass is
	// counted, not timed
	var d PrefillClock
	assert.Equal(t, PrefillStatus{Done: 8, Total: 32, Pass: 1, Passes: 4}, d.Observe(8, 32, 0, 8, at(0)))
	assert.Equal(t, PrefillStatus{Done: 16, Total: 32, Pass: 2, Passes: 4, Elapsed: 5, Left: 10}, d.Observe(16, 32, 0, 8, at(5)))
	assert.Equal(t, 5.0, d.PassSeconds, "one timed pass in 5 s")
}
