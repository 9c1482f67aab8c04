package kernels

import "sync"

// f64Pool recycles float64 scratch (activations widened once per call).
var f64Pool sync.Pool

func getF64(n int) *[]float64 {
	if v, ok := f64Pool.Get().(*[]float64); ok && cap(*v) >= n {
		*v = (*v)[:n]
		return v
	}
	b := make([]float64, n, n+n/4)
	return &b
}

func putF64(b *[]float64) { f64Pool.Put(b) }
