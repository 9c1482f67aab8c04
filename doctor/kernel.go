package doctor

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Compute is the measured kernel speed.
type Compute struct {
	Threads   int     `json:"threads"`
	BF16GBps  float64 `json:"bf16_gbps"`  // exact bf16 dot products, weight bytes/s, all threads
	MXFP4GBps float64 `json:"mxfp4_gbps"` // exact MXFP4 dot products, weight bytes/s, all threads
	Measured  bool    `json:"measured"`   // false: the documented defaults were used
}

// benchRows is the shape of the weight block each thread streams: 2048 rows
// of 7168 columns = 29 MB of bf16 per thread (beyond a per-core share of
// L3, so DRAM is read as in decode).
const (
	benchCols = 7168
	benchRows = 2048
)

// measureCompute runs exact float64-accumulating bf16 and MXFP4 dot
// products (the numeric contract of package kernels, portable scalar form:
// 8 float64 lanes) on `threads` goroutines for about d each and returns
// weight bytes per second. It has its own copy of the loops so the doctor
// does not depend on the kernels package's build; the engine's SIMD
// kernels are faster, so this errs on the slow side.
func measureCompute(ctx context.Context, threads int, d time.Duration) Compute {
	if threads < 1 {
		threads = 1
	}
	c := Compute{Threads: threads, Measured: true}
	r := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, benchCols)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	type block struct {
		w      []uint16
		packed []byte
		scales []byte
	}
	blocks := make([]block, min(threads, 8)) // threads share blocks beyond 8: memory stays < 300 MB
	for t := range blocks {
		w := make([]uint16, benchRows*benchCols)
		for i := range w {
			w[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
		}
		packed := make([]byte, benchRows*benchCols/2)
		for i := range packed {
			packed[i] = byte(r.Uint32())
		}
		scales := make([]byte, benchRows*benchCols/mxGroup)
		for i := range scales {
			scales[i] = byte(120 + r.IntN(10))
		}
		blocks[t] = block{w, packed, scales}
	}
	run := func(rowBytes int, dot func(b *block, row int) float32) float64 {
		var total atomic.Int64
		var sink atomic.Uint32
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(b *block) {
				defer wg.Done()
				var acc float32
				for row := 0; ; row = (row + 1) % benchRows {
					acc += dot(b, row)
					if row%64 == 63 {
						total.Add(int64(64 * rowBytes))
						if time.Now().After(deadline) || ctx.Err() != nil {
							break
						}
					}
				}
				sink.Add(uint32(int32(acc)))
			}(&blocks[t%len(blocks)])
		}
		wg.Wait()
		return float64(total.Load()) / time.Since(start).Seconds() / 1e9
	}
	c.BF16GBps = run(benchCols*2, func(b *block, row int) float32 {
		return dotBF16(b.w[row*benchCols:(row+1)*benchCols], x)
	})
	c.MXFP4GBps = run(benchCols/2+benchCols/mxGroup, func(b *block, row int) float32 {
		p := b.packed[row*benchCols/2 : (row+1)*benchCols/2]
		s := b.scales[row*benchCols/mxGroup : (row+1)*benchCols/mxGroup]
		return dotMXFP4(p, s, x)
	})
	return c
}

// defaultCompute is used when measuring is skipped.
func defaultCompute(threads int) Compute {
	return Compute{Threads: threads, BF16GBps: DefaultBF16GBps * float64(threads), MXFP4GBps: DefaultMXFP4GBps * float64(threads)}
}

const mxGroup = 32

// e2m1 holds the 16 FP4 (E2M1) values; bit 3 is the sign.
var e2m1 = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// dotBF16: bf16 weights widened exactly, products and sums in float64 over
// 8 lanes.
func dotBF16(w []uint16, x []float32) float32 {
	var a [8]float64
	n := len(x)
	w = w[:n]
	for i := 0; i+8 <= n; i += 8 {
		for l := 0; l < 8; l++ {
			a[l] += float64(math.Float32frombits(uint32(w[i+l])<<16)) * float64(x[i+l])
		}
	}
	return float32(((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])))
}

// dotMXFP4: E2M1 nibbles (low nibble first) times a shared E8M0 scale per
// 32 elements, accumulated in float64 over 8 lanes.
func dotMXFP4(packed, scales []byte, x []float32) float32 {
	var a [8]float64
	for g := 0; g*mxGroup < len(x); g++ {
		s := scales[g]
		if s == 255 {
			continue
		}
		sc := math.Ldexp(1, int(s)-127)
		p := packed[g*mxGroup/2 : g*mxGroup/2+mxGroup/2]
		xg := x[g*mxGroup : g*mxGroup+mxGroup]
		for j := 0; j < mxGroup/2; j += 4 {
			for k := 0; k < 4; k++ {
				b := p[j+k]
				a[2*k] += e2m1[b&15] * sc * float64(xg[2*(j+k)])
				a[2*k+1] += e2m1[b>>4] * sc * float64(xg[2*(j+k)+1])
			}
		}
	}
	return float32(((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])))
}
