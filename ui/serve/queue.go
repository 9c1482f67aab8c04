package serve

import (
	"context"
	"errors"
	"sync"
)

// errBusy is returned when the queue is full.
var errBusy = errors.New("the server is busy: every queue place is taken, try again later")

// queue lets one generation run at a time and up to max more wait, in the
// order they came (FIFO).
type queue struct {
	mu      sync.Mutex
	max     int
	running bool
	waiting []*place
}

// place is one request's place in the queue.
type place struct {
	q    *queue
	turn chan struct{} // closed when it is this place's turn
	done bool
}

// join takes a place at the end of the queue, or fails with errBusy when
// max places are already waiting. It never blocks, so a request can be
// refused before anything of its response is written.
func (q *queue) join() (*place, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := &place{q: q, turn: make(chan struct{})}
	if !q.running && len(q.waiting) == 0 {
		q.running = true
		close(p.turn)
		return p, nil
	}
	if len(q.waiting) >= q.max {
		return nil, errBusy
	}
	q.waiting = append(q.waiting, p)
	return p, nil
}

// wait returns nil when it is this place's turn, or ctx's error.
func (p *place) wait(ctx context.Context) error {
	select {
	case <-p.turn:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave gives up the place: the turn passes on if it was this place's,
// else the place leaves the line. Calling it again does nothing.
func (p *place) leave() {
	q := p.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	select {
	case <-p.turn:
	default:
		for i, w := range q.waiting {
			if w == p {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				return
			}
		}
	}
	if len(q.waiting) == 0 {
		q.running = false
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	close(next.turn)
}

// depth reports whether a generation runs and how many wait.
func (q *queue) depth() (running bool, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running, len(q.waiting)
}
