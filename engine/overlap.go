package engine

import (
	"context"
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

// Overlap is how well a stretch of decoding overlapped its reads with its
// compute. Read is the time some read was in flight; Compute the time the
// forward was not waiting for a read. An engine that never overlaps takes
// Read + Compute; a perfect one max(Read, Compute).
type Overlap struct {
	Tokens         int     `json:"tokens"`
	WallSeconds    float64 `json:"wall_seconds"`
	ReadSeconds    float64 `json:"read_seconds"`
	ComputeSeconds float64 `json:"compute_seconds"`
	BytesRead      int64   `json:"bytes_read"`
	// Efficiency is max(Read, Compute) / Wall: 1 is perfect overlap, 0.5
	// what strictly alternating equal reads and compute give.
	Efficiency float64 `json:"overlap_efficiency"`
}

// SecondsPerToken is the measured wall time per token.
func (o Overlap) SecondsPerToken() float64 { return o.WallSeconds / float64(max(o.Tokens, 1)) }

// BoundSecondsPerToken is max(read, compute) per token: what perfect
// overlap would give.
func (o Overlap) BoundSecondsPerToken() float64 {
	return max(o.ReadSeconds, o.ComputeSeconds) / float64(max(o.Tokens, 1))
}

// OverlapOf derives the overlap of a stretch from the counters it
// accumulated (Stats.Sub) and its wall time.
func OverlapOf(d Stats, wall float64, tokens int) Overlap {
	o := Overlap{Tokens: tokens, WallSeconds: wall, ReadSeconds: d.ReadBusySeconds,
		ComputeSeconds: max(wall-d.IOWaitSeconds(), 0), BytesRead: d.BytesRead()}
	if wall > 0 {
		o.Efficiency = max(o.ReadSeconds, o.ComputeSeconds) / wall
	}
	return o
}

// MeasureOverlap decodes tokens greedy steps one position at a time after
// prompt (prefill not measured) and returns their overlap: what a bench
// reports per preset as s/token next to max(read, compute).
func MeasureOverlap(ctx context.Context, e *Engine, prompt []int, tokens int) (Overlap, error) {
	s := e.m.NewState()
	logits, err := e.Feed(ctx, s, prompt, false)
	if err != nil {
		return Overlap{}, err
	}
	// the clock starts before the counters are read and stops after: the
	// read time the counters give lies inside the wall time
	t0 := time.Now()
	start := e.counters()
	id := argmax(logits)
	for i := 0; i < tokens; i++ {
		if logits, err = e.Feed(ctx, s, []int{id}, false); err != nil {
			return Overlap{}, err
		}
		id = argmax(logits)
	}
	d := e.counters().Sub(start)
	return OverlapOf(d, time.Since(t0).Seconds(), tokens), nil
}
