package engine

import (
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
	time.Sleep(20 * time.Millisecond)
	assert.False(t, passed.Load(), "yield returned with 2 urgent reads outstanding")
	io.urgentAdd(-1)
	time.Sleep(20 * time.Millisecond)
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
