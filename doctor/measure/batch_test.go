package measure

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/kernels"
)

// fakePeer reports a fixed rate per T and records the calls.
type fakePeer struct{ calls []int }

func (f *fakePeer) Name() string { return "fake" }
func (f *fakePeer) Threads() int { return 3 }
func (f *fakePeer) MatMul(_ context.Context, sh Shape, T int) (float64, error) {
	f.calls = append(f.calls, T)
	return float64(T) + float64(len(f.calls)%2), nil
}

// TestBatch runs the small-batch harness on small shapes: one line per
// shape and T in order, the peer called once per repeat, interleaved,
// medians over the repeats and the ratios derived from them.
func TestBatch(t *testing.T) {
	peer := &fakePeer{}
	var reported []BatchResult
	res, err := Batch(context.Background(), BatchConfig{
		Threads: 2, Shapes: []Shape{{kernels.BF16, 64, 256}, {kernels.MXFP4, 32, 256}}, Tokens: []int{1, 4},
		Reps: 3, MinTime: 4 * time.Millisecond, Peer: peer, Arena: 4 << 20,
		Report: func(r BatchResult) { reported = append(reported, r) },
	})
	require.NoError(t, err)
	assert.Equal(t, res, reported)
	require.Len(t, res, 4)
	assert.Equal(t, []int{1, 4, 1, 4, 1, 4, 1, 4, 1, 4, 1, 4}, peer.calls)
	for i, r := range res {
		assert.Equal(t, []string{"bf16", "bf16", "mxfp4", "mxfp4"}[i], r.DType)
		assert.Equal(t, []int{1, 4}[i%2], r.Tokens)
		assert.Equal(t, 3, r.Reps)
		assert.Equal(t, "fake", r.Peer)
		assert.Equal(t, 3, r.PeerThreads)
		assert.Positive(t, r.GFLOPs)
		assert.LessOrEqual(t, r.GFLOPsMin, r.GFLOPs)
		assert.GreaterOrEqual(t, r.GFLOPsMax, r.GFLOPs)
		// the fake's rates alternate T, T+1 over the calls; the median of 3
		assert.Contains(t, []float64{float64(r.Tokens), float64(r.Tokens + 1)}, r.PeerGFLOPs)
		assert.Equal(t, r.GFLOPs/r.PeerGFLOPs, r.RatioToPeer)
		if kernels.CurrentLevel() != kernels.LevelPortable {
			assert.Positive(t, r.Roofline)
			assert.Equal(t, r.GFLOPs/r.Roofline, r.Fraction)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err = Batch(ctx, BatchConfig{Shapes: []Shape{{kernels.BF16, 64, 256}}, Tokens: []int{2}, Arena: 1 << 20})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, res)
	_, err = Batch(context.Background(), BatchConfig{Shapes: []Shape{{kernels.BF16, 4096, 4096}}, Arena: 1 << 20})
	assert.ErrorContains(t, err, "does not fit")
}

// TestFMARoofline: a positive peak on every SIMD level, none on portable.
func TestFMARoofline(t *testing.T) {
	prev := kernels.CurrentLevel()
	defer kernels.SetLevel(prev)
	for _, l := range kernels.Levels() {
		kernels.SetLevel(l)
		g := FMARoofline(2, 5*time.Millisecond)
		if l == kernels.LevelPortable {
			assert.Zero(t, g)
		} else {
			assert.Positive(t, g, "%v", l)
		}
	}
	assert.Equal(t, 1.5, median([]float64{2, 1}))
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
}
