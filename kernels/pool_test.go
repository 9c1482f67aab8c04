package kernels

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolCoversRows(t *testing.T) {
	for th := 1; th <= 4; th++ {
		p := NewPool(th)
		for _, spin := range []time.Duration{0, DefaultSpin} {
			p.SetSpin(spin)
			for rep := 0; rep < 50; rep++ {
				n := 1 + rep*37%1000
				hits := make([]int32, n)
				p.Rows(n, 1+rep%7, func(r0, r1 int) {
					for i := r0; i < r1; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("threads=%d n=%d: row %d done %d times", th, n, i, h)
					}
				}
				if rep%10 == 0 {
					time.Sleep(time.Millisecond) // let workers fall asleep
				}
			}
		}
		p.Hold()
		var sum atomic.Int64
		p.Each(100, func(i int) { sum.Add(int64(i)) })
		p.Release()
		if sum.Load() != 4950 {
			t.Fatalf("Each sum %d", sum.Load())
		}
		p.Close()
		p.Close()
	}
	var np *Pool
	n := 0
	np.Rows(10, 3, func(r0, r1 int) { n += r1 - r0 })
	if n != 10 || np.Threads() != 1 {
		t.Fatal("nil pool")
	}
}

func TestPoolNested(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var total atomic.Int64
	p.Each(8, func(i int) {
		p.Rows(100, 7, func(r0, r1 int) { total.Add(int64(r1 - r0)) })
	})
	if total.Load() != 800 {
		t.Fatalf("nested rows: %d", total.Load())
	}
}
