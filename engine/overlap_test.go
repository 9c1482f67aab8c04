package engine

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestYieldWaitsForUrgentReads: a trunk read yields while expert reads are
// outstanding and goes on once the last one has finished.
func TestYieldWaitsForUrgentReads(t *testing.T) {
	var io ioTracker
	io.yield() // nothing outstanding: returns at once
	io.urgentAdd(2)
	var passed atomic.Bool
	done := make(chan struct{})
	go func() {
		io.yield()
		passed.Store(true)
		close(done)
	}()
	waitUntilWaiting(t, &io)
	assert.False(t, passed.Load(), "yield returned with 2 urgent reads outstanding")
	io.urgentAdd(-1)
	waitUntilWaiting(t, &io)
	assert.False(t, passed.Load(), "yield returned with 1 urgent read outstanding")
	io.urgentAdd(-1)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		require.Fail(t, "yield still waiting after the last urgent read")
	}
	var none *ioTracker
	none.urgentAdd(1) // nil-safe
	none.yield()
}

// waitUntilWaiting returns once a yield is blocked on t's condition (or
// fails after 10 s): what the test checks next holds while it is blocked.
func waitUntilWaiting(t *testing.T, io *ioTracker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		io.mu.Lock()
		w := io.waiting
		io.mu.Unlock()
		if w == 1 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no yield is waiting")
		runtime.Gosched()
	}
}
