package bridge

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A job's progress is coalesced (a burst of values is shown a few times,
// in order, ending with the last) and its result comes after the last
// progress; Cancel reaches the work through its context.
func TestJobCoalescesAndPostsLast(t *testing.T) {
	var mu sync.Mutex
	do := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }
	var shown []int
	var result error
	done := make(chan struct{})
	j := StartJob(do, 20, func(ctx context.Context, progress func(int)) error {
		for i := 1; i <= 10000; i++ {
			progress(i)
		}
		return errors.New("finished")
	}, func(p int) { shown = append(shown, p) }, func(err error) { result = err; close(done) })
	<-done
	j.Wait()
	mu.Lock()
	require.NotEmpty(t, shown)
	assert.Equal(t, 10000, shown[len(shown)-1], "the last progress is always shown")
	assert.Less(t, len(shown), 100, "a burst is coalesced, not replayed")
	assert.IsIncreasing(t, shown)
	assert.EqualError(t, result, "finished")
	mu.Unlock()

	started := make(chan struct{})
	var got error
	finished := make(chan struct{})
	j = StartJob(do, 20, func(ctx context.Context, progress func(int)) error {
		close(started)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return nil
		}
	}, nil, func(err error) { got = err; close(finished) })
	<-started
	j.Cancel()
	<-finished
	assert.ErrorIs(t, got, context.Canceled)
}
