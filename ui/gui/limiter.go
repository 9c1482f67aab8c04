package gui

import (
	"sync"
	"time"
)

// limiter lets through at most hz events a second (the first always).
type limiter struct {
	mu   sync.Mutex
	gap  time.Duration
	last time.Time
}

func newLimiter(hz int) *limiter { return &limiter{gap: time.Second / time.Duration(hz)} }

func (l *limiter) ok() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.last.IsZero() || now.Sub(l.last) >= l.gap {
		l.last = now
		return true
	}
	return false
}
