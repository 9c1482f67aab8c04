package bridge

import (
	"context"
	"sync"
	"time"
)

// Job is background work a view started: it runs on its own goroutine with
// a cancellable context, its progress is coalesced (only the newest value
// is kept) and shown at most hz times a second, and its result is posted
// after the last progress. Every callback runs through do (fyne.Do in the
// app), so views touch widgets only on the UI goroutine.
type Job struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartJob runs work. show gets the newest progress value (never one older
// than a value already shown; the last one is always shown before done);
// done gets work's error. Cancel stops work through its context.
func StartJob[P any](do func(func()), hz int, work func(ctx context.Context, progress func(P)) error, show func(P), done func(error)) *Job {
	ctx, cancel := context.WithCancel(context.Background())
	j := &Job{cancel: cancel, done: make(chan struct{})}
	var mu sync.Mutex
	var latest P
	dirty := false
	var inflight chan struct{} // a show handed to do and not run yet
	// flush shows the newest progress; while a show waits for the UI the
	// next is held back (final waits for it), so a slow UI gets no backlog
	flush := func(final bool) {
		mu.Lock()
		if ch := inflight; ch != nil {
			if !final {
				mu.Unlock()
				return
			}
			mu.Unlock()
			<-ch
			mu.Lock()
		}
		p, ok := latest, dirty
		dirty = false
		if !ok || show == nil {
			mu.Unlock()
			return
		}
		ch := make(chan struct{})
		inflight = ch
		mu.Unlock()
		do(func() {
			defer func() {
				mu.Lock()
				inflight = nil
				mu.Unlock()
				close(ch)
			}()
			show(p)
		})
	}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(time.Second / time.Duration(max(hz, 1)))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				flush(false)
			}
		}
	}()
	go func() {
		defer close(j.done)
		err := work(ctx, func(p P) {
			mu.Lock()
			latest, dirty = p, true
			mu.Unlock()
		})
		close(stop)
		<-ticked
		flush(true)
		cancel()
		if done != nil {
			do(func() { done(err) })
		}
	}()
	return j
}

// Cancel asks the work to stop; done still follows.
func (j *Job) Cancel() {
	if j != nil {
		j.cancel()
	}
}

// Wait returns once done was handed to do (tests, shutdown).
func (j *Job) Wait() {
	if j != nil {
		<-j.done
	}
}
