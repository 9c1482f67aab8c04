package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// benchBF16CMats is a 7168x7168 trained-like bf16 matrix (98 MiB, well
// above the L3 cache, so every pass reads it from RAM) and its BF16C form.
var benchBF16CMats = sync.OnceValues(func() (*Mat, *Mat) {
	m := trainedBF16(rand.New(rand.NewPCG(7168, 7168)), 7168, 7168)
	c := CompressBF16(m)
	return m, &c
})

// BenchmarkBF16C compares MatMul of BF16C with BF16 on the same weights at
// the current level. The bytes per second are logical: the matrix's bf16
// size, whatever it is stored as. Run it several times (for example
// -count 1 in a loop) to interleave the two forms on a loaded machine.
func BenchmarkBF16C(b *testing.B) {
	bm, cm := benchBF16CMats()
	for _, T := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, threads := range []int{1, 2} {
			for _, m := range []*Mat{bm, cm} {
				b.Run(fmt.Sprintf("T%d/threads%d/%v", T, threads, m.DType), func(b *testing.B) {
					x := make([]float32, T*m.Cols)
					for i := range x {
						x[i] = float32(i%13-6) * 0.25
					}
					dst := make([]float32, T*m.Rows)
					p := NewPool(threads)
					defer p.Close()
					b.SetBytes(2 * int64(m.Rows) * int64(m.Cols))
					for b.Loop() {
						MatMul(p, dst, m, x, T)
					}
					b.ReportMetric(2*float64(m.Rows)*float64(m.Cols)*float64(T)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					b.ReportMetric(float64(m.Bytes())/float64(2*m.Rows*m.Cols), "stored/bf16")
				})
			}
		}
	}
}
