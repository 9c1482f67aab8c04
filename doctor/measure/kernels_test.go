package measure

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/kernels"
)

// TestKernels runs the harness on small shapes: the read bandwidth first,
// then every shape x tokens x threads in order, each ratio its rate over the
// limit at its thread count.
func TestKernels(t *testing.T) {
	var reported []KernelResult
	var logs []string
	cfg := KernelConfig{
		Threads: []int{1, 2}, Tokens: []int{1, 4},
		Shapes: []Shape{{kernels.BF16, 256, 512}, {kernels.MXFP4, 128, 256}},
		Arena:  8 << 20, MinTime: 5 * time.Millisecond,
		Report: func(r KernelResult) { reported = append(reported, r) },
		Log:    func(s string) { logs = append(logs, s) },
	}
	res, err := Kernels(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, res, reported)
	require.Len(t, res, 2+2*2*2)
	type key struct {
		kernel, dtype string
		rows, tokens  int
		threads       int
	}
	var got []key
	for _, r := range res {
		got = append(got, key{r.Kernel, r.DType, r.Rows, r.Tokens, r.Threads})
		assert.Positive(t, r.GBps, "%+v", r)
		assert.Equal(t, r.GBps/r.LimitGBps, r.Ratio, "%+v", r)
	}
	assert.Equal(t, []key{
		{"read-bandwidth", "", 0, 0, 1}, {"read-bandwidth", "", 0, 0, 2},
		{"matvec", "bf16", 256, 1, 1}, {"matvec", "bf16", 256, 1, 2}, {"matmul", "bf16", 256, 4, 1}, {"matmul", "bf16", 256, 4, 2},
		{"matvec", "mxfp4", 128, 1, 1}, {"matvec", "mxfp4", 128, 1, 2}, {"matmul", "mxfp4", 128, 4, 1}, {"matmul", "mxfp4", 128, 4, 2},
	}, got)
	// mat-mat is compared with the limit of the mat-vec before it
	assert.Equal(t, res[2].LimitGBps, res[4].LimitGBps)
	assert.Equal(t, 2*256*512*4*res[4].GBps/float64(256*512*2), res[4].GFLOPs)
	assert.Len(t, logs, 3)
	assert.Contains(t, logs[1], "bf16 256x512: 32 copies")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err = Kernels(ctx, cfg)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, res)

	cfg.Shapes = []Shape{{kernels.BF16, 4096, 4096}}
	_, err = Kernels(context.Background(), cfg)
	assert.ErrorContains(t, err, "does not fit")
}

// TestCarveMats: 4 KiB-aligned copies of valid matrices (MXFP4 scales in
// 118..125) over the filled arena.
func TestCarveMats(t *testing.T) {
	raw := make([]uint64, 3<<10)
	fillArena(raw)
	for _, w := range raw {
		for s := 0; s < 64; s += 16 {
			e := w >> (s + 7) & 0xff
			assert.True(t, e >= 0x78 && e <= 0x7c, "bf16 exponent %#x", e)
		}
	}
	b := make([]byte, 24<<10)
	for i := range b {
		b[i] = byte(i)
	}
	mats := carveMats(Shape{kernels.MXFP4, 64, 64}, b)
	require.Len(t, mats, 6) // 2048 + 128 bytes, rounded up to 4 KiB
	for i, m := range mats {
		assert.Len(t, m.Packed, 2048)
		assert.Len(t, m.Scales, 64*64/kernels.MXGroup)
		assert.Equal(t, &b[i*4096], &m.Packed[0])
		for _, s := range m.Scales {
			assert.True(t, s >= 118 && s <= 125)
		}
	}
	assert.Len(t, carveMats(Shape{kernels.BF16, 64, 64}, b), 3)
	assert.Len(t, carveMats(Shape{kernels.F32, 64, 64}, b), 1)
	assert.Equal(t, []int{1}, KernelThreads(1))
	assert.Equal(t, []int{1, 3}, KernelThreads(3))
}

// TestReadBandwidth: a positive rate over whole 1 MiB blocks, 0 below one.
func TestReadBandwidth(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	assert.Positive(t, ReadBandwidth(p, make([]byte, 4<<20), 10*time.Millisecond))
	assert.Zero(t, ReadBandwidth(p, make([]byte, 1<<19), time.Millisecond))
	bw, err := RAM(p, 8<<20, 10*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, bw)
}

// TestTimeCalls: a slow first call is the measurement; otherwise call 0 is
// a warm-up and at least two are timed.
func TestTimeCalls(t *testing.T) {
	var calls []int
	timeCalls(func(i int) { calls = append(calls, i) }, 0)
	assert.Equal(t, []int{0}, calls)
	calls = nil
	sec := timeCalls(func(i int) { calls = append(calls, i) }, 5*time.Millisecond)
	assert.GreaterOrEqual(t, len(calls), 3)
	assert.Equal(t, 0, calls[0])
	assert.Positive(t, sec)
	calls = nil
	timeCalls(func(i int) {
		calls = append(calls, i)
		time.Sleep(2 * time.Millisecond)
	}, time.Millisecond)
	assert.Equal(t, []int{0}, calls)
}
