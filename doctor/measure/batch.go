package measure

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"k3/kernels"
	"k3/storage/direct"
)

// FMARoofline is the machine's float64 FMA peak in GFLOP/s on threads
// threads: each runs kernels.FMALoop (independent fused multiply-adds on the
// widest vectors of the current level, no memory traffic) on its own OS
// thread for about d. Every product of k3's exact kernels is one such FMA,
// so this bounds them. 0 on the portable level (no such loop).
func FMARoofline(threads int, d time.Duration) float64 {
	threads = max(threads, 1)
	const block = 1 << 16
	if kernels.FMALoop(1) == 0 {
		return 0
	}
	var wg sync.WaitGroup
	flops := make([]int64, threads)
	start := make(chan struct{})
	for i := range flops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			<-start
			end := time.Now().Add(d)
			for time.Now().Before(end) {
				flops[i] += kernels.FMALoop(block)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	sec := time.Since(t0).Seconds()
	var sum int64
	for _, f := range flops {
		sum += f
	}
	return float64(sum) / sec / 1e9
}

// BatchResult is one line of the small-batch table of `k3 bench kernels`:
// k3's mat-mul of T tokens at a shape, the roofline measured next to it,
// and the peer's rate at the same shape, each the median of the repeats
// (with the smallest and largest).
type BatchResult struct {
	Kernel       string  `json:"kernel"` // "batch"
	DType        string  `json:"dtype"`
	Rows         int     `json:"rows"`
	Cols         int     `json:"cols"`
	Tokens       int     `json:"tokens"`
	Threads      int     `json:"threads"`
	Reps         int     `json:"reps"`
	GFLOPs       float64 `json:"gflops"` // k3, 2*rows*cols*tokens per second / 1e9
	GFLOPsMin    float64 `json:"gflops_min"`
	GFLOPsMax    float64 `json:"gflops_max"`
	Roofline     float64 `json:"roofline_gflops"` // float64 FMA peak on Threads threads
	Fraction     float64 `json:"roofline_fraction"`
	Peer         string  `json:"peer,omitempty"`
	PeerThreads  int     `json:"peer_threads,omitempty"`
	PeerGFLOPs   float64 `json:"peer_gflops,omitempty"`
	PeerMin      float64 `json:"peer_gflops_min,omitempty"`
	PeerMax      float64 `json:"peer_gflops_max,omitempty"`
	RatioToPeer  float64 `json:"ratio_to_peer,omitempty"` // GFLOPs / PeerGFLOPs
	PeerFraction float64 `json:"peer_roofline_fraction,omitempty"`
}

// BatchShapes are the shapes of the small-batch table: a K3-like block of
// 4096 output rows over the 7168-wide hidden state, in bf16 (the trunk) and
// MXFP4 (the experts).
var BatchShapes = []Shape{{kernels.BF16, 4096, 7168}, {kernels.MXFP4, 4096, 7168}}

// BatchTokens are its token counts: the positions of one weight pass in
// speculative verification and chunked prefill.
var BatchTokens = []int{1, 2, 4, 8, 16, 32, 64}

// BatchConfig controls Batch.
type BatchConfig struct {
	Threads int               // k3's threads (<= 0: KernelThreads(0)'s largest)
	Shapes  []Shape           // nil: BatchShapes
	Tokens  []int             // nil: BatchTokens
	Reps    int               // repeats of every measurement, interleaved (<= 0: 3)
	MinTime time.Duration     // per k3 measurement (0: 0.5 s); the roofline takes a quarter
	Peer    Peer              // nil: k3 only
	Arena   int64             // bytes of weights cycled through (0: 1 GiB)
	Report  func(BatchResult) // called as each line is ready (may be nil)
	Log     func(string)      // progress notes (may be nil)
}

// Batch measures k3's mat-mul at every shape and token count, with the FMA
// roofline and the peer (if any), interleaved: each repeat runs, for each
// shape and T, the roofline, k3 and the peer one after the other, so that
// all three see the machine in the same state; every figure is the median
// of the repeats. k3's weights are copies cycled through an arena larger
// than any cache, as in Kernels, so each call streams its matrix from DRAM
// (the peer reuses one matrix of its own). A cancelled ctx ends it after
// the measurement in flight with the lines completed so far.
func Batch(ctx context.Context, cfg BatchConfig) ([]BatchResult, error) {
	cfg.defaults()
	arena, err := direct.AllocHuge(int(cfg.Arena &^ 4095))
	if err != nil {
		return nil, err
	}
	defer arena.Free()
	raw := arena.Bytes()
	fillArena(unsafe.Slice((*uint64)(unsafe.Pointer(&raw[0])), len(raw)/8))

	cells := make([][]batchCell, len(cfg.Shapes))
	mats := make([][]*kernels.Mat, len(cfg.Shapes))
	for i, sh := range cfg.Shapes {
		cells[i] = make([]batchCell, len(cfg.Tokens))
		// each shape gets its share of the arena
		share := len(raw) / len(cfg.Shapes) &^ 4095
		mats[i] = carveMats(sh, raw[i*share:(i+1)*share])
		if len(mats[i]) == 0 {
			return nil, fmt.Errorf("measure: a %v %dx%d matrix does not fit in a %d-byte arena share", sh.DType, sh.Rows, sh.Cols, share)
		}
	}
	p := kernels.NewPool(cfg.Threads)
	defer p.Close()
	var out []BatchResult
	for rep := 0; rep < cfg.Reps; rep++ {
		for i, sh := range cfg.Shapes {
			for j, T := range cfg.Tokens {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				if cfg.Log != nil {
					cfg.Log(fmt.Sprintf("repeat %d/%d: %v %dx%d T=%d", rep+1, cfg.Reps, sh.DType, sh.Rows, sh.Cols, T))
				}
				if err := cells[i][j].measure(ctx, p, &cfg, sh, mats[i], T); err != nil {
					return out, err
				}
			}
		}
	}
	for i, sh := range cfg.Shapes {
		for j, T := range cfg.Tokens {
			r := cells[i][j].result(&cfg, sh, T)
			out = append(out, r)
			if cfg.Report != nil {
				cfg.Report(r)
			}
		}
	}
	return out, nil
}

// defaults fills in the zero fields of c.
func (c *BatchConfig) defaults() {
	if c.Shapes == nil {
		c.Shapes = BatchShapes
	}
	if c.Tokens == nil {
		c.Tokens = BatchTokens
	}
	if c.Threads <= 0 {
		th := KernelThreads(0)
		c.Threads = th[len(th)-1]
	}
	if c.Reps <= 0 {
		c.Reps = 3
	}
	if c.MinTime <= 0 {
		c.MinTime = 500 * time.Millisecond
	}
	if c.Arena <= 0 {
		c.Arena = 1 << 30
	}
}

// batchCell gathers one shape and token count's repeats: k3's GFLOP/s, the
// FMA roofline measured beside each, and the peer's.
type batchCell struct{ k3, roof, peer []float64 }

// measure times one repeat of T tokens through a matrix of shape sh (the
// copies ms in turn), with the roofline measured just before it.
func (c *batchCell) measure(ctx context.Context, p *kernels.Pool, cfg *BatchConfig, sh Shape, ms []*kernels.Mat, T int) error {
	c.roof = append(c.roof, FMARoofline(cfg.Threads, cfg.MinTime/4))
	x := testInput(T * sh.Cols)
	dst := make([]float32, T*sh.Rows)
	p.Hold()
	sec := timeCalls(func(k int) { kernels.MatMul(p, dst, ms[k%len(ms)], x, T) }, cfg.MinTime)
	p.Release()
	c.k3 = append(c.k3, 2*float64(sh.Rows)*float64(sh.Cols)*float64(T)/sec/1e9)
	if cfg.Peer != nil {
		g, err := cfg.Peer.MatMul(ctx, sh, T)
		if err != nil {
			return err
		}
		c.peer = append(c.peer, g)
	}
	return nil
}

// result is the cell's row: medians, ranges and the ratios to the
// roofline and the peer.
func (c *batchCell) result(cfg *BatchConfig, sh Shape, T int) BatchResult {
	r := BatchResult{Kernel: "batch", DType: sh.DType.String(), Rows: sh.Rows, Cols: sh.Cols, Tokens: T,
		Threads: cfg.Threads, Reps: cfg.Reps, Roofline: median(c.roof)}
	r.GFLOPs, r.GFLOPsMin, r.GFLOPsMax = median(c.k3), slices.Min(c.k3), slices.Max(c.k3)
	if r.Roofline > 0 {
		r.Fraction = r.GFLOPs / r.Roofline
	}
	if cfg.Peer != nil {
		r.Peer, r.PeerThreads = cfg.Peer.Name(), cfg.Peer.Threads()
		r.PeerGFLOPs, r.PeerMin, r.PeerMax = median(c.peer), slices.Min(c.peer), slices.Max(c.peer)
		r.RatioToPeer = r.GFLOPs / r.PeerGFLOPs
		if r.Roofline > 0 {
			r.PeerFraction = r.PeerGFLOPs / r.Roofline
		}
	}
	return r
}
