package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool runs row-parallel work on a fixed set of workers. Work is handed out
// in small chunks from an atomic counter; results never depend on which
// worker computed a row. A nil *Pool runs everything on the caller.
type Pool struct {
	n    int
	jobs []chan *job
	wg   sync.WaitGroup
}

type job struct {
	n, chunk int
	next     atomic.Int64
	fn       func(r0, r1 int)
	done     sync.WaitGroup
}

// NewPool starts a pool with n workers (n <= 0: the number of CPUs).
// The caller's goroutine works too, so n-1 goroutines are started.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	p := &Pool{n: n}
	for i := 1; i < n; i++ {
		ch := make(chan *job, 1)
		p.jobs = append(p.jobs, ch)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for j := range ch {
				j.run()
				j.done.Done()
			}
		}()
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

// Close stops the workers.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	for _, ch := range p.jobs {
		close(ch)
	}
	p.wg.Wait()
	p.jobs = nil
}

func (j *job) run() {
	for {
		r0 := int(j.next.Add(int64(j.chunk))) - j.chunk
		if r0 >= j.n {
			return
		}
		j.fn(r0, min(r0+j.chunk, j.n))
	}
}

// Rows calls fn on disjoint [r0,r1) blocks covering [0,n), in parallel.
func (p *Pool) Rows(n, chunk int, fn func(r0, r1 int)) {
	if chunk < 1 {
		chunk = 1
	}
	if p == nil || len(p.jobs) == 0 || n <= chunk {
		fn(0, n)
		return
	}
	j := &job{n: n, chunk: chunk, fn: fn}
	helpers := min(len(p.jobs), (n+chunk-1)/chunk-1)
	j.done.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.jobs[i] <- j
	}
	j.run()
	j.done.Wait()
}

// Each calls fn(i) for i in [0,n) in parallel (independent items such as heads).
func (p *Pool) Each(n int, fn func(i int)) {
	p.Rows(n, 1, func(r0, r1 int) {
		for i := r0; i < r1; i++ {
			fn(i)
		}
	})
}
