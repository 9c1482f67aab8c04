package doctor

import (
	"context"
	"math/rand/v2"
	"time"

	"k3/kernels"
)

// Compute is the measured kernel speed.
type Compute struct {
	Threads   int     `json:"threads"`
	BF16GBps  float64 `json:"bf16_gbps"`  // bf16 mat-vec, weight bytes/s, all threads
	MXFP4GBps float64 `json:"mxfp4_gbps"` // MXFP4 mat-vec, weight bytes/s, all threads
	Measured  bool    `json:"measured"`   // false: the documented defaults were used
	Kernels   string  `json:"kernels"`    // the kernel path measured (avx512, avx2, portable)
}

// The measured matrices: a 7168-wide bf16 block and an MXFP4 block at the
// expert shape, several copies each so the working set (~300 MB) is far
// beyond L3 and DRAM is read as in decode.
const (
	benchCols   = 7168
	benchRows   = 4096
	benchCopies = 5
)

// measureCompute times the engine's own mat-vec kernels (package kernels,
// the exact float64-accumulating contract, the SIMD path this CPU gets) on a
// pool of `threads` for about d each, cycling through copies of the weights,
// and returns weight bytes per second.
func measureCompute(ctx context.Context, threads int, d time.Duration) Compute {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	c := Compute{Threads: pool.Threads(), Measured: true, Kernels: kernels.CurrentLevel().String()}
	r := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, benchCols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var bf, mx []*kernels.Mat
	for k := 0; k < benchCopies; k++ {
		m := &kernels.Mat{DType: kernels.BF16, Rows: benchRows, Cols: benchCols, BF16: make([]uint16, benchRows*benchCols)}
		for i := range m.BF16 {
			m.BF16[i] = kernels.F32ToBF16(float32(r.NormFloat64()))
		}
		bf = append(bf, m)
		q := &kernels.Mat{DType: kernels.MXFP4, Rows: benchRows, Cols: benchCols,
			Packed: make([]byte, benchRows*benchCols/2), Scales: make([]byte, benchRows*benchCols/kernels.MXGroup)}
		for i := range q.Packed {
			q.Packed[i] = byte(r.Uint32())
		}
		for i := range q.Scales {
			q.Scales[i] = byte(120 + r.IntN(10))
		}
		mx = append(mx, q)
	}
	out := make([]float32, benchRows)
	run := func(ms []*kernels.Mat) float64 {
		var bytes int64
		start := time.Now()
		for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
			m := ms[i%len(ms)]
			kernels.MatVec(pool, out, m, x)
			bytes += m.Bytes()
		}
		return float64(bytes) / time.Since(start).Seconds() / 1e9
	}
	c.BF16GBps = run(bf)
	c.MXFP4GBps = run(mx)
	return c
}

// defaultCompute is used when measuring is skipped.
func defaultCompute(threads int) Compute {
	return Compute{Threads: threads, BF16GBps: DefaultBF16GBps * float64(threads), MXFP4GBps: DefaultMXFP4GBps * float64(threads)}
}
