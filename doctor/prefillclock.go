package doctor

import "time"

// PrefillClock is the measured side of the prefill cost model
// (prefill.go predicts): while a prompt is read in passes of Chunk
// positions, it says which pass it is at, how many the prompt takes and
// the time left at the mean time of the passes read so far. The pass time
// carries over to the next prompt, so a chat gives its next prompt an
// estimate from the start. k3 run, k3 chat and the app's status line all
// read their prompt's progress through one.
type PrefillClock struct {
	// Chunk is how many positions one pass reads, as the engine last said
	// (0: not said yet).
	Chunk int
	// PassSeconds is the measured time of one pass: this prompt's mean
	// once a pass of it is read, else the last prompt's (0: none yet).
	PassSeconds float64
	start       time.Time
	begun       bool // the prompt's start time is known
	read        bool // the prompt's first progress was seen
	lastDone    int
	passes      int // passes read of this prompt
	untimed     int // of them, read before the clock started
}

// PrefillStatus is where the reading of a prompt is.
type PrefillStatus struct {
	Done, Total, Reused int
	// Pass is the passes read of this prompt; Passes the passes it takes
	// (Pass when the pass size is not known).
	Pass, Passes int
	// Elapsed is the seconds since the reading started; Left the
	// estimated seconds still to go (0 when done or nothing measured yet).
	Elapsed, Left float64
}

// Begin starts a new prompt whose reading starts at now: its first pass is
// timed from then.
func (c *PrefillClock) Begin(now time.Time) {
	c.Reset()
	c.start, c.begun = now, true
}

// Reset starts a new prompt whose start is not known: the clock starts at
// the first Observe, whose passes are counted but not timed.
func (c *PrefillClock) Reset() {
	c.begun, c.read, c.passes, c.untimed = false, false, 0, 0
}

// Observe says where the reading is at now: done of total positions,
// reused of them kept from before (a prompt cache, the conversation so
// far), chunk positions a pass (0: as before). Called with done == reused
// before anything is read, it says what the reading will take. A step
// forward counts one pass, or as many as its positions fill.
func (c *PrefillClock) Observe(done, total, reused, chunk int, now time.Time) PrefillStatus {
	if chunk > 0 {
		c.Chunk = chunk
	}
	if !c.read {
		c.read, c.lastDone = true, reused
		if !c.begun { // what was read before now is counted, not timed
			c.start, c.begun = now, true
			c.step(done)
			c.untimed = c.passes
		}
	}
	elapsed := now.Sub(c.start).Seconds()
	if c.step(done) && elapsed > 0 {
		c.PassSeconds = elapsed / float64(c.passes-c.untimed)
	}
	left := ceilDiv(total-done, c.Chunk)
	return PrefillStatus{Done: done, Total: total, Reused: reused, Pass: c.passes, Passes: c.passes + left,
		Elapsed: elapsed, Left: float64(left) * c.PassSeconds}
}

// step counts the passes up to done: a step forward is one pass, or as
// many as its positions fill. It says whether there was one.
func (c *PrefillClock) step(done int) bool {
	if done <= c.lastDone {
		return false
	}
	c.passes += max(1, ceilDiv(done-c.lastDone, c.Chunk))
	c.lastDone = done
	return true
}

// ceilDiv is a/b rounded up; 0 when either is not positive.
func ceilDiv(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
