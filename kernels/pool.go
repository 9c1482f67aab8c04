package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs row-parallel work on a fixed set of workers that live as long as
// the pool (no goroutine per call). Work is handed out in chunks from an
// atomic counter; the caller works too, so a worker that is slow to wake
// only means the others take more chunks. Results never depend on which
// worker computed a row. A nil *Pool runs everything on the caller.
//
// After a job, workers spin for a short window (SetSpin; DefaultSpin) before
// they sleep: on small VMs a sleeping thread can take milliseconds to be
// scheduled again, which would dominate a mat-vec. Between Hold and Release
// (e.g. around a forward pass) they do not sleep at all.
type Pool struct {
	n       int
	workers []*worker
	cur     atomic.Pointer[job]
	gen     atomic.Uint64
	spinNs  atomic.Int64
	hold    atomic.Int32
	closed  atomic.Bool
	wg      sync.WaitGroup
	closeMu sync.Mutex
}

type worker struct {
	sleeping atomic.Bool
	wake     chan struct{}
}

type job struct {
	n, chunk int
	next     atomic.Int64
	done     atomic.Int64 // rows finished
	fn       func(r0, r1 int)
}

// DefaultSpin is how long an idle worker polls for the next job before it
// goes to sleep.
const DefaultSpin = 500 * time.Microsecond

// NewPool starts a pool with n workers including the caller, so n-1
// goroutines start. The caller chooses n (k3 uses one per physical core,
// machine.DefaultThreads); n <= 0 falls back to GOMAXPROCS.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = max(n, 1)
	p := &Pool{n: n}
	p.spinNs.Store(int64(DefaultSpin))
	for i := 1; i < n; i++ {
		w := &worker{wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		p.wg.Add(1)
		go p.work(w)
	}
	return p
}

// Threads is the number of workers including the caller.
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.n
}

// SetSpin sets how long idle workers poll before sleeping (0: sleep at once).
func (p *Pool) SetSpin(d time.Duration) {
	if p != nil {
		p.spinNs.Store(int64(max(d, 0)))
	}
}

// Hold keeps the workers awake (polling) until the matching Release; calls
// nest. Use it around a burst of kernels such as one forward pass.
func (p *Pool) Hold() {
	if p != nil {
		p.hold.Add(1)
	}
}

// Release ends a Hold.
func (p *Pool) Release() {
	if p != nil {
		p.hold.Add(-1)
	}
}

// Close stops the workers; the pool must not be used afterwards. Closing
// twice is harmless.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed.Load() {
		return
	}
	p.closed.Store(true)
	p.gen.Add(1)
	p.wakeAll()
	p.wg.Wait()
}

func (p *Pool) wakeAll() {
	for _, w := range p.workers {
		if w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
}

func (p *Pool) work(w *worker) {
	defer p.wg.Done()
	var seen uint64
	for {
		seen = p.await(w, seen)
		if p.closed.Load() {
			return
		}
		if j := p.cur.Load(); j != nil {
			j.run()
		}
	}
}

// await returns once the job generation differs from seen: polling first,
// then (outside a Hold, after the spin window) asleep on the wake channel.
func (p *Pool) await(w *worker, seen uint64) uint64 {
	var deadline time.Time
	for i := 1; ; i++ {
		if g := p.gen.Load(); g != seen {
			return g
		}
		if i%128 != 0 {
			continue
		}
		if p.hold.Load() > 0 {
			deadline = time.Time{}
			runtime.Gosched()
			continue
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(time.Duration(p.spinNs.Load()))
		}
		if now.Before(deadline) {
			runtime.Gosched()
			continue
		}
		// sleep; the poster clears sleeping (CAS) before it sends a token
		w.sleeping.Store(true)
		if g := p.gen.Load(); g != seen {
			if !w.sleeping.CompareAndSwap(true, false) {
				<-w.wake // the poster claimed us: consume its token
			}
			return g
		}
		<-w.wake
		deadline = time.Time{}
	}
}

func (j *job) run() {
	for {
		r0 := int(j.next.Add(int64(j.chunk))) - j.chunk
		if r0 >= j.n {
			return
		}
		r1 := min(r0+j.chunk, j.n)
		j.fn(r0, r1)
		j.done.Add(int64(r1 - r0))
	}
}

// Rows calls fn on disjoint [r0,r1) blocks of at most chunk rows covering
// [0,n), in parallel, and returns when all are done. Calls may overlap
// (from several goroutines, or from inside fn): every caller works through
// its own job, and idle workers join the most recently posted one.
func (p *Pool) Rows(n, chunk int, fn func(r0, r1 int)) {
	if chunk < 1 {
		chunk = 1
	}
	if n <= 0 {
		return
	}
	if p == nil || len(p.workers) == 0 || n <= chunk {
		fn(0, n)
		return
	}
	j := &job{n: n, chunk: chunk, fn: fn}
	p.cur.Store(j)
	p.gen.Add(1)
	p.wakeAll()
	j.run()
	for i := 1; j.done.Load() != int64(n); i++ {
		if i%64 == 0 {
			runtime.Gosched()
		}
	}
	p.cur.CompareAndSwap(j, nil)
}

// Each calls fn(i) for i in [0,n) in parallel (independent items such as heads).
func (p *Pool) Each(n int, fn func(i int)) {
	p.Rows(n, 1, func(r0, r1 int) {
		for i := r0; i < r1; i++ {
			fn(i)
		}
	})
}
