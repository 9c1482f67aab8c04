package measure

import (
	"time"

	"k3/kernels"
	"k3/storage/direct"
)

// ReadBandwidth measures streaming reads of buf (all of it per pass, split
// in 1 MiB blocks among the pool's threads, each block read by
// kernels.ReadBlock) for at least minTime, in GB/s; 0 when buf is shorter
// than one block.
func ReadBandwidth(p *kernels.Pool, buf []byte, minTime time.Duration) float64 {
	const block = 1 << 20
	nb := len(buf) / block
	if nb == 0 {
		return 0
	}
	sinks := make([]uint64, nb)
	pass := func(int) {
		p.Rows(nb, 1, func(b0, b1 int) {
			for b := b0; b < b1; b++ {
				sinks[b] += kernels.ReadBlock(buf[b*block : (b+1)*block])
			}
		})
	}
	p.Hold()
	defer p.Release()
	sec := timeCalls(pass, minTime)
	return float64(nb*block) / sec / 1e9
}

// RAM measures the read bandwidth of a fresh huge-page buffer of n bytes
// (well above the last-level cache) on the pool's threads.
func RAM(p *kernels.Pool, n int, minTime time.Duration) (float64, error) {
	buf, err := direct.AllocHuge(n)
	if err != nil {
		return 0, err
	}
	defer buf.Free()
	b := buf.Bytes()
	clear(b) // fault the pages in before timing
	return ReadBandwidth(p, b, minTime), nil
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
