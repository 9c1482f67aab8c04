package engine

import (
	"sync"
	"time"
)

// ioTracker measures read time as the disk sees it: the wall time during
// which at least one read (a trunk layer, an expert, a table chunk) is in
// flight, whether or not the forward waits for it. Reads that overlap
// compute count here and not in the wait counters.
//
// It also orders reads: expert reads are urgent (the layer computing waits
// for them), trunk read-ahead is not, so a trunk read in pieces yields
// between pieces while expert reads are outstanding.
type ioTracker struct {
	mu      sync.Mutex
	active  int
	since   time.Time
	busy    float64
	urgent  int        // expert reads asked for and not yet finished
	calm    *sync.Cond // broadcast when urgent drops to 0
	waiting int        // yields waiting on calm
}

// urgentAdd counts n urgent reads asked for (n < 0: finished). Nil-safe.
func (t *ioTracker) urgentAdd(n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.urgent += n
	if t.urgent <= 0 && t.calm != nil {
		t.calm.Broadcast()
	}
	t.mu.Unlock()
}

// yield waits while urgent reads are outstanding. Nil-safe.
func (t *ioTracker) yield() {
	if t == nil {
		return
	}
	t.mu.Lock()
	for t.urgent > 0 {
		if t.calm == nil {
			t.calm = sync.NewCond(&t.mu)
		}
		t.waiting++
		t.calm.Wait()
		t.waiting--
	}
	t.mu.Unlock()
}

// begin marks a read starting; end must follow. Nil-safe.
func (t *ioTracker) begin() {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.active == 0 {
		t.since = time.Now()
	}
	t.active++
	t.mu.Unlock()
}

func (t *ioTracker) end() {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.active--; t.active == 0 {
		t.busy += time.Since(t.since).Seconds()
	}
	t.mu.Unlock()
}

// seconds is the read time so far, a read in flight included.
func (t *ioTracker) seconds() float64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.busy
	if t.active > 0 {
		b += time.Since(t.since).Seconds()
	}
	return b
}
