package gui

import (
	"sync"
	"time"
)

// manualClock is a laterFunc for tests: what is due waits until the test
// calls Advance, on the test's goroutine, so no timer outlives its test or
// runs beside it.
type manualClock struct {
	mu      sync.Mutex
	now     time.Duration
	pending []timed
}

type timed struct {
	at time.Duration
	f  func()
}

func (c *manualClock) After(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, timed{c.now + d, f})
}

// Advance moves the clock on by d and runs what fell due, in order.
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	var due []func()
	rest := c.pending[:0]
	for _, p := range c.pending {
		if p.at <= c.now {
			due = append(due, p.f)
		} else {
			rest = append(rest, p)
		}
	}
	c.pending = rest
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// Pending is the number of functions still waiting.
func (c *manualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}
