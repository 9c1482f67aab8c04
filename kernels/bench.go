package kernels

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// BenchResult is one line of `k3 bench kernels`: a kernel at one shape,
// token count and thread count, or (Kernel "read-bandwidth") the streaming
// read rate of the machine that the kernels are compared with.
type BenchResult struct {
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

// BenchShape is a weight matrix shape of the real model.
type BenchShape struct {
	DType      DType
	Rows, Cols int
}

// BenchShapes are the K3 shapes `k3 bench kernels` measures: the bf16 trunk
// projections and the MXFP4 routed experts.
var BenchShapes = []BenchShape{
	{BF16, 7168, 7168}, {BF16, 12288, 7168}, {BF16, 7168, 12288}, {BF16, 33792, 7168},
	{MXFP4, 3072, 3584}, {MXFP4, 3584, 3072},
}

// BenchConfig controls BenchKernels.
type BenchConfig struct {
	Quick   bool              // short runs (the whole suite in well under 40 s)
	Threads int               // the multi-threaded measurements (<= 0: GOMAXPROCS; k3 bench passes one per physical core)
	Tokens  []int             // nil: 1, 8, 32
	Shapes  []BenchShape      // nil: BenchShapes
	Report  func(BenchResult) // called as each result is ready (may be nil)
	Log     func(string)      // progress notes (may be nil)
	Arena   int64             // bytes of weights cycled through (0: 1.5 GiB)
	MinTime time.Duration     // per measurement (0: 0.25 s quick, 1 s otherwise)
}

// BenchKernels measures the read bandwidth with 1 and N threads and then
// every kernel shape at each token count with 1 and N threads; each mat-vec
// is bracketed by two more read-bandwidth measurements and compared with the
// larger, mat-mat with the latest at its thread count. The weights
// are copies spread over an arena larger than any cache, cycled so that each
// call streams its matrix from DRAM.
func BenchKernels(cfg BenchConfig) []BenchResult {
	if cfg.Tokens == nil {
		cfg.Tokens = []int{1, 8, 32}
	}
	if cfg.Shapes == nil {
		cfg.Shapes = BenchShapes
	}
	if cfg.Arena <= 0 {
		cfg.Arena = 3 << 29
	}
	if cfg.MinTime <= 0 {
		cfg.MinTime = time.Second
		if cfg.Quick {
			cfg.MinTime = 250 * time.Millisecond
		}
	}
	nt := cfg.Threads
	if nt <= 0 {
		nt = runtime.GOMAXPROCS(0)
	}
	threads := []int{1}
	if nt > 1 {
		threads = append(threads, nt)
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			cfg.Log(fmt.Sprintf(format, a...))
		}
	}
	var out []BenchResult
	emit := func(r BenchResult) {
		out = append(out, r)
		if cfg.Report != nil {
			cfg.Report(r)
		}
	}
	raw, huge, free := benchArena(int(cfg.Arena &^ 7))
	defer free()
	pages := "4 KiB pages"
	if huge {
		pages = "huge pages advised"
	}
	logf("level %v, filling %.1f GiB of weights (%s)", CurrentLevel(), float64(cfg.Arena)/(1<<30), pages)
	fillArena(unsafe.Slice((*uint64)(unsafe.Pointer(&raw[0])), len(raw)/8))

	limit := map[int]float64{}
	for _, th := range threads {
		p := NewPool(th)
		bw := ReadBandwidth(p, raw, cfg.MinTime)
		p.Close()
		limit[th] = bw
		emit(BenchResult{Kernel: "read-bandwidth", Threads: th, GBps: bw, LimitGBps: bw, Ratio: 1})
	}
	for _, sh := range cfg.Shapes {
		mats := benchMats(sh, raw)
		logf("%v %dx%d: %d copies", sh.DType, sh.Rows, sh.Cols, len(mats))
		for _, T := range cfg.Tokens {
			x := make([]float32, T*sh.Cols)
			for i := range x {
				x[i] = float32(i%17-8) * 0.125
			}
			dst := make([]float32, T*sh.Rows)
			for _, th := range threads {
				p := NewPool(th)
				// mat-vec is compared with the read bandwidth measured just
				// before and just after it (the larger of the two): on a
				// shared machine the rate drifts within a run
				var before float64
				if T == 1 {
					before = ReadBandwidth(p, raw, cfg.MinTime/2)
				}
				p.Hold()
				sec := timeCalls(func(i int) { MatMul(p, dst, mats[i%len(mats)], x, T) }, cfg.MinTime)
				p.Release()
				if T == 1 {
					limit[th] = max(before, ReadBandwidth(p, raw, cfg.MinTime/2))
				}
				p.Close()
				m := mats[0]
				gb := float64(m.Bytes()) / sec / 1e9
				kernel := "matvec"
				if T > 1 {
					kernel = "matmul"
				}
				emit(BenchResult{
					Kernel: kernel, DType: sh.DType.String(), Rows: sh.Rows, Cols: sh.Cols, Tokens: T, Threads: th,
					GBps: gb, GFLOPs: 2 * float64(sh.Rows) * float64(sh.Cols) * float64(T) / sec / 1e9,
					LimitGBps: limit[th], Ratio: gb / limit[th],
				})
			}
		}
	}
	return out
}

// timeCalls returns seconds per call of f. Call 0 is a warm-up unless it
// alone took minTime (then it is the measurement: the slow shapes stream
// from DRAM anyway); otherwise calls repeat until minTime has passed and at
// least two are timed.
func timeCalls(f func(i int), minTime time.Duration) float64 {
	t0 := time.Now()
	f(0)
	if d := time.Since(t0); d >= minTime {
		return d.Seconds()
	}
	start := time.Now()
	n := 0
	for n < 2 || time.Since(start) < minTime {
		n++
		f(n)
	}
	return time.Since(start).Seconds() / float64(n)
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

// benchMats carves as many copies of the shape as fit in raw.
func benchMats(sh BenchShape, raw []byte) []*Mat {
	m := Mat{DType: sh.DType, Rows: sh.Rows, Cols: sh.Cols}
	size := int(m.Bytes())
	size = (size + 4095) &^ 4095
	var mats []*Mat
	for off := 0; off+size <= len(raw); off += size {
		c := m
		b := raw[off : off+size]
		switch sh.DType {
		case F32:
			c.F32 = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), sh.Rows*sh.Cols)
		case BF16:
			c.BF16 = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), sh.Rows*sh.Cols)
		default:
			np := sh.Rows * sh.Cols / 2
			c.Packed = b[:np:np]
			c.Scales = b[np : np+sh.Rows*sh.Cols/MXGroup]
			// E8M0 scales 118..125 (bf16 high bytes here are 0x3c-0x3d or 0xbc-0xbd)
			for i := range c.Scales {
				c.Scales[i] = 118 + c.Scales[i]&7
			}
		}
		mats = append(mats, &c)
	}
	return mats
}

// ReadBandwidth measures streaming reads of buf (all of it per pass, split
// in 1 MiB blocks among the pool's threads) for at least minTime, in GB/s.
func ReadBandwidth(p *Pool, buf []byte, minTime time.Duration) float64 {
	const block = 1 << 20
	nb := len(buf) / block
	if nb == 0 {
		return 0
	}
	sinks := make([]uint64, nb)
	pass := func(int) {
		p.Rows(nb, 1, func(b0, b1 int) {
			for b := b0; b < b1; b++ {
				sinks[b] += readBlock(buf[b*block : (b+1)*block])
			}
		})
	}
	p.Hold()
	defer p.Release()
	sec := timeCalls(pass, minTime)
	return float64(nb*block) / sec / 1e9
}

// readGo is the portable read loop: 8 independent 64-bit streams.
func readGo(b []byte) uint64 {
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
	var a [8]uint64
	for i := 0; i+8 <= len(w); i += 8 {
		a[0] ^= w[i]
		a[1] ^= w[i+1]
		a[2] ^= w[i+2]
		a[3] ^= w[i+3]
		a[4] ^= w[i+4]
		a[5] ^= w[i+5]
		a[6] ^= w[i+6]
		a[7] ^= w[i+7]
	}
	return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7]
}

// heapArena is benchArena on the Go heap (8-byte aligned).
func heapArena(n int) ([]byte, bool, func()) {
	a := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), n), false, func() { runtime.KeepAlive(a) }
}
