package engine

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/layout"
	st "k3/storage/safetensors"
)

// TestExpertIndexForgotten: after Open the set no longer indexes the routed
// experts (the store holds their places, 88 bytes an expert, the size
// doctor's ExpertIndexBytes is measured with), the model still reports
// every tensor, and an expert read through the store has the checkpoint's
// bytes, part by part.
func TestExpertIndexForgotten(t *testing.T) {
	assert.Equal(t, uintptr(88), unsafe.Sizeof(expertLoc{}), "an expert's place grew: re-measure doctor.ExpertIndexBytes")
	dir := fixture.ModelDir("tiny-release")
	full, err := st.Open(dir)
	require.NoError(t, err)
	defer full.Close()
	m, err := Open(dir, Options{Budget: Budget{TrunkBytes: 1, CacheBytes: 1 << 30}})
	require.NoError(t, err)
	defer m.Close()
	routed := 0
	for _, n := range full.Names() {
		if r, ok := strings.CutPrefix(n, m.Prefix); ok && layout.IsRoutedExpert(r) {
			routed++
			_, ok := m.set.Get(n)
			assert.False(t, ok, "%s is still indexed", n)
		} else {
			_, ok := m.set.Get(n)
			assert.True(t, ok, "%s was forgotten", n)
		}
	}
	require.Positive(t, routed)
	assert.Equal(t, full.Len(), m.Tensors())
	assert.Equal(t, full.Len()-routed, m.set.Len())
	li := 0
	for m.Cfg.IsDense(li) {
		li++
	}
	e := m.Cfg.Experts - 1
	got, err := m.experts.Acquire(li, []int{e})
	require.NoError(t, err)
	defer m.experts.Release(li, []int{e})
	base := fmt.Sprintf("%smodel.layers.%d.block_sparse_moe.experts.%d.", m.Prefix, li, e)
	x := got[0]
	for i, p := range [][]byte{x.W1.Packed, x.W1.Scales, x.W3.Packed, x.W3.Scales, x.W2.Packed, x.W2.Scales} {
		name := base + [6]string{"w1.weight_packed", "w1.weight_scale", "w3.weight_packed", "w3.weight_scale", "w2.weight_packed", "w2.weight_scale"}[i]
		tn, ok := full.Get(name)
		require.True(t, ok, name)
		want := make([]byte, tn.Size)
		require.NoError(t, full.ReadTensor(tn, want))
		assert.Equal(t, want, p, name)
	}
}
