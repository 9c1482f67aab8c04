package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The swing: GOGC percent of every live byte (the heap's and the
// engine's), and the scavenger's 10% above the goal; what the engine holds
// on the heap.
func TestHeapSwing(t *testing.T) {
	h := HeapPoint{Live: 40e6, Goal: 80e6, GOGC: 100}
	assert.Equal(t, int64(1.1*80e6-40e6), RuntimeOverhead(h, 0))
	assert.Equal(t, int64(1.1*(80e6+20e6)-50e6), RuntimeOverhead(h, 10e6))
	assert.Equal(t, int64(1.1*(60e6+15e6)-50e6), RuntimeOverhead(HeapPoint{Live: 40e6, Goal: 60e6, GOGC: 50}, 10e6))
	assert.Zero(t, RuntimeOverhead(HeapPoint{Live: 40e6, Goal: 1 << 62, GOGC: -1}, 10e6), "the collector off")
	p := &Plan{PinnedBytes: 1e9, Globals: 2e8, RingBytes: 3e9, CacheBytes: 4e9, State: 1, KV: 20, Buffers: 300, Spec: 4000}
	assert.Equal(t, int64(4321), p.EngineHeap(true))
	assert.Equal(t, int64(1.2e9+4321), p.EngineHeap(false), "layers and tables read from the shards")
	at := LowHeap()
	assert.Positive(t, at.Live)
	assert.GreaterOrEqual(t, at.Goal, at.Live)
	assert.Equal(t, int64(100), at.GOGC, "go test runs with the default GOGC")
}
