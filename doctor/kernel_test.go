package doctor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/kernels"
)

// TestMeasureCompute times the two decode shapes through the bench harness:
// every rate is measured and the RAM limit is the read bandwidth.
func TestMeasureCompute(t *testing.T) {
	c, err := measureCompute(context.Background(), 2, 20*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, c.Measured)
	assert.Equal(t, 2, c.Threads)
	assert.Equal(t, kernels.CurrentLevel().String(), c.Kernels)
	assert.Positive(t, c.BF16GBps)
	assert.Positive(t, c.MXFP4GBps)
	assert.Positive(t, c.RAMGBps)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = measureCompute(ctx, 1, time.Millisecond)
	assert.ErrorIs(t, err, context.Canceled)
}
