package measure

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"k3/kernels"
	"k3/machine"
	"k3/storage/direct"
)

// KernelResult is one line of `k3 bench kernels`: a kernel at one shape,
// token count and thread count, or (Kernel "read-bandwidth") the streaming
// read rate of the machine that the kernels are compared with.
type KernelResult struct {
	Kernel    string  `json:"kernel"`
	DType     string  `json:"dtype"`
	Rows      int     `json:"rows"`
	Cols      int     `json:"cols"`
	Tokens    int     `json:"tokens"`
	Threads   int     `json:"threads"`
	GBps      float64 `json:"gbps"`       // weight bytes per second / 1e9
	GFLOPs    float64 `json:"gflops"`     // 2*rows*cols*tokens per second / 1e9
	LimitGBps float64 `json:"limit_gbps"` // read bandwidth at this thread count (for T = 1: the larger of the measurements just before and after)
	Ratio     float64 `json:"ratio"`      // GBps / LimitGBps
}

// Shape is a weight matrix shape.
type Shape struct {
	DType      kernels.DType
	Rows, Cols int
}

// K3Shapes are the shapes `k3 bench kernels` measures: the bf16 trunk
// projections and the MXFP4 routed experts of the real model.
var K3Shapes = []Shape{
	{kernels.BF16, 7168, 7168}, {kernels.BF16, 12288, 7168}, {kernels.BF16, 7168, 12288}, {kernels.BF16, 33792, 7168},
	{kernels.MXFP4, 3072, 3584}, {kernels.MXFP4, 3584, 3072},
}

// KernelConfig controls Kernels.
type KernelConfig struct {
	Quick   bool               // short runs (the whole K3 suite in well under 40 s)
	Threads []int              // thread counts measured (nil: KernelThreads(0))
	Tokens  []int              // nil: 1, 8, 32
	Shapes  []Shape            // nil: K3Shapes
	Report  func(KernelResult) // called as each result is ready (may be nil)
	Log     func(string)       // progress notes (may be nil)
	Arena   int64              // bytes of weights cycled through (0: 1.5 GiB)
	MinTime time.Duration      // per measurement (0: 0.25 s quick, 1 s otherwise)
}

// KernelThreads is 1 and n threads (n <= 0: the physical cores, at most
// GOMAXPROCS), the thread counts `k3 bench kernels` compares.
func KernelThreads(n int) []int {
	if n <= 0 {
		n = machine.DefaultThreads()
	}
	if n > 1 {
		return []int{1, n}
	}
	return []int{1}
}

// Kernels measures the read bandwidth at each thread count and then every
// shape at each token count and thread count; each mat-vec is bracketed by
// two more read-bandwidth measurements and compared with the larger,
// mat-mat with the latest at its thread count. The weights are copies
// spread over a huge-page arena larger than any cache (the pages the
// engine's pinned trunk and expert slots use), cycled so that each call
// streams its matrix from DRAM. A cancelled ctx ends it after the
// measurement in flight, with the results so far.
func Kernels(ctx context.Context, cfg KernelConfig) ([]KernelResult, error) {
	cfg.defaults()
	var out []KernelResult
	emit := func(r KernelResult) {
		out = append(out, r)
		if cfg.Report != nil {
			cfg.Report(r)
		}
	}
	arena, err := direct.AllocHuge(int(cfg.Arena &^ 4095))
	if err != nil {
		return nil, err
	}
	defer arena.Free()
	raw := arena.Bytes()
	pages := "4 KiB pages"
	if arena.Huge() {
		pages = "huge pages advised"
	}
	cfg.logf("level %v, filling %.1f GiB of weights (%s)", kernels.CurrentLevel(), float64(cfg.Arena)/(1<<30), pages)
	fillArena(unsafe.Slice((*uint64)(unsafe.Pointer(&raw[0])), len(raw)/8))

	limit := map[int]float64{}
	for _, th := range cfg.Threads {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		p := kernels.NewPool(th)
		bw := ReadBandwidth(p, raw, cfg.MinTime)
		p.Close()
		limit[th] = bw
		emit(KernelResult{Kernel: "read-bandwidth", Threads: th, GBps: bw, LimitGBps: bw, Ratio: 1})
	}
	for _, sh := range cfg.Shapes {
		mats := carveMats(sh, raw)
		if len(mats) == 0 {
			return out, fmt.Errorf("measure: a %v %dx%d matrix does not fit in a %d-byte arena", sh.DType, sh.Rows, sh.Cols, len(raw))
		}
		cfg.logf("%v %dx%d: %d copies", sh.DType, sh.Rows, sh.Cols, len(mats))
		for _, T := range cfg.Tokens {
			x := testInput(T * sh.Cols)
			dst := make([]float32, T*sh.Rows)
			for _, th := range cfg.Threads {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				emit(timeKernel(th, sh, mats, x, dst, T, raw, cfg.MinTime, limit))
			}
		}
	}
	return out, nil
}

// defaults fills in the zero fields of c.
func (c *KernelConfig) defaults() {
	if c.Tokens == nil {
		c.Tokens = []int{1, 8, 32}
	}
	if c.Shapes == nil {
		c.Shapes = K3Shapes
	}
	if c.Threads == nil {
		c.Threads = KernelThreads(0)
	}
	if c.Arena <= 0 {
		c.Arena = 3 << 29
	}
	if c.MinTime <= 0 {
		c.MinTime = time.Second
		if c.Quick {
			c.MinTime = 250 * time.Millisecond
		}
	}
}

func (c *KernelConfig) logf(format string, a ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, a...))
	}
}

// timeKernel times T tokens through the copies mats of shape sh on th
// threads, against limit[th]: for a mat-vec (T == 1), limit[th] becomes the
// read bandwidth measured just before and just after it (the larger of the
// two), since on a shared machine the rate drifts within a run.
func timeKernel(th int, sh Shape, mats []*kernels.Mat, x, dst []float32, T int, raw []byte, minTime time.Duration, limit map[int]float64) KernelResult {
	p := kernels.NewPool(th)
	var before float64
	if T == 1 {
		before = ReadBandwidth(p, raw, minTime/2)
	}
	p.Hold()
	sec := timeCalls(func(i int) { kernels.MatMul(p, dst, mats[i%len(mats)], x, T) }, minTime)
	p.Release()
	if T == 1 {
		limit[th] = max(before, ReadBandwidth(p, raw, minTime/2))
	}
	p.Close()
	gb := float64(mats[0].Bytes()) / sec / 1e9
	kernel := "matvec"
	if T > 1 {
		kernel = "matmul"
	}
	return KernelResult{
		Kernel: kernel, DType: sh.DType.String(), Rows: sh.Rows, Cols: sh.Cols, Tokens: T, Threads: th,
		GBps: gb, GFLOPs: 2 * float64(sh.Rows) * float64(sh.Cols) * float64(T) / sec / 1e9,
		LimitGBps: limit[th], Ratio: gb / limit[th],
	}
}

// testInput is n activations with a fixed, varied pattern (the values do
// not change a kernel's speed).
func testInput(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%17-8) * 0.125
	}
	return x
}

// fillArena writes plausible weights fast: every 16-bit word is a normal
// bf16 of magnitude 2^-7..2^-3 (no Inf/NaN, no subnormals), which as MXFP4
// bytes are arbitrary codes; scales are carved from the same words below.
func fillArena(a []uint64) {
	s := uint64(0x9e3779b97f4a7c15)
	for i := range a {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		a[i] = s&0x81ff81ff81ff81ff | 0x3c003c003c003c00
	}
}

// carveMats carves as many 4 KiB-aligned copies of the shape as fit in raw
// (filled by fillArena).
func carveMats(sh Shape, raw []byte) []*kernels.Mat {
	m := kernels.Mat{DType: sh.DType, Rows: sh.Rows, Cols: sh.Cols}
	size := (int(m.Bytes()) + 4095) &^ 4095
	var mats []*kernels.Mat
	for off := 0; off+size <= len(raw); off += size {
		c := m
		b := raw[off : off+size]
		switch sh.DType {
		case kernels.F32:
			c.F32 = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), sh.Rows*sh.Cols)
		case kernels.BF16:
			c.BF16 = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), sh.Rows*sh.Cols)
		default:
			np := sh.Rows * sh.Cols / 2
			c.Packed = b[:np:np]
			c.Scales = b[np : np+sh.Rows*sh.Cols/kernels.MXGroup]
			// E8M0 scales 118..125 (bf16 high bytes here are 0x3c-0x3d or 0xbc-0xbd)
			for i := range c.Scales {
				c.Scales[i] = 118 + c.Scales[i]&7
			}
		}
		mats = append(mats, &c)
	}
	return mats
}
