package doctor

import (
	"context"
	"time"

	"k3/doctor/measure"
	"k3/kernels"
)

// Compute is the measured kernel speed.
type Compute struct {
	Threads   int     `json:"threads"`
	BF16GBps  float64 `json:"bf16_gbps"`  // bf16 mat-vec, weight bytes/s, all threads
	MXFP4GBps float64 `json:"mxfp4_gbps"` // MXFP4 mat-vec, weight bytes/s, all threads
	RAMGBps   float64 `json:"ram_gbps"`   // streaming read bandwidth, all threads (the best before and after the kernels); 0 when not measured
	Measured  bool    `json:"measured"`   // false: the documented defaults were used
	Kernels   string  `json:"kernels"`    // the kernel path measured (avx512, avx2, portable)
	FMAGFlops float64 `json:"fma_gflops"` // float64 FMA peak, GFLOP/s, all threads (the vision tower's limit)
}

// The measured shapes: 4096 x 7168 blocks in bf16 and in MXFP4, T = 1
// (decode), in copies spread over a 384 MiB arena, far beyond L3, so DRAM
// is read as in decode.
var computeShapes = []measure.Shape{{DType: kernels.BF16, Rows: 4096, Cols: 7168}, {DType: kernels.MXFP4, Rows: 4096, Cols: 7168}}

const computeArena = 384 << 20

// measureCompute times the engine's own mat-vec kernels (package kernels,
// the exact float64-accumulating contract, the SIMD path this CPU gets) on
// a pool of `threads` with the harness of `k3 bench kernels` (about d per
// shape, the read bandwidth before and after included), and the RAM read
// bandwidth they are compared with; rates are weight bytes per second.
func measureCompute(ctx context.Context, threads int, d time.Duration) (Compute, error) {
	c := Compute{Threads: threads, Measured: true, Kernels: kernels.CurrentLevel().String()}
	res, err := measure.Kernels(ctx, measure.KernelConfig{Threads: []int{threads}, Tokens: []int{1}, Shapes: computeShapes,
		Arena: computeArena, MinTime: d / 2})
	if err != nil {
		return c, err
	}
	c.FMAGFlops = measure.FMARoofline(threads, 300*time.Millisecond)
	for _, r := range res {
		c.RAMGBps = max(c.RAMGBps, r.LimitGBps)
		switch r.DType {
		case kernels.BF16.String():
			c.BF16GBps = r.GBps
		case kernels.MXFP4.String():
			c.MXFP4GBps = r.GBps
		}
	}
	return c, nil
}

// defaultCompute is used when measuring is skipped.
func defaultCompute(threads int) Compute {
	return Compute{Threads: threads, BF16GBps: DefaultBF16GBps * float64(threads), MXFP4GBps: DefaultMXFP4GBps * float64(threads),
		FMAGFlops: DefaultFMAGFlops * float64(threads)}
}
