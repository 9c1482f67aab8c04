package safetensors

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForget: the forgotten tensors leave Get, Len and Names; the kept ones
// are found and read as before; a *Tensor taken before Forget still reads;
// Files still counts every tensor.
func TestForget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	all := sampleTensors()
	require.NoError(t, WriteSharded(dir, [][]WriteTensor{all[:3], all[3:4], all[4:]}))
	s, err := Open(dir)
	require.NoError(t, err)
	defer s.Close()
	before, ok := s.Get("w.f32")
	require.True(t, ok)
	require.Len(t, s.Names(), len(all)) // fills the names cache Forget must reset
	gone := func(n string) bool { return strings.Contains(n, ".") && n != "b.bf16" }
	var kept []WriteTensor
	for _, w := range all {
		if !gone(w.Name) {
			kept = append(kept, w)
		}
	}
	assert.Equal(t, len(all)-len(kept), s.Forget(gone))
	assert.Equal(t, 0, s.Forget(gone), "nothing left to forget")
	assert.Equal(t, len(kept), s.Len())
	var names []string
	for _, w := range kept {
		names = append(names, w.Name)
		tn, ok := s.Get(w.Name)
		require.True(t, ok, w.Name)
		assert.Equal(t, w.DType, tn.DType)
		assert.Equal(t, w.Shape, tn.Shape)
		b := make([]byte, tn.Size)
		require.NoError(t, s.ReadTensor(tn, b))
		assert.Equal(t, len(w.Data), len(b))
		if len(w.Data) > 0 {
			assert.Equal(t, w.Data, b, w.Name)
		}
	}
	assert.ElementsMatch(t, names, s.Names())
	for _, w := range all {
		if gone(w.Name) {
			_, ok := s.Get(w.Name)
			assert.False(t, ok, w.Name)
		}
	}
	got := make([]float32, 4)
	require.NoError(t, s.ReadFloat32(before, got))
	assert.Equal(t, []float32{1, -2, 3.5, 1e-3}, got)
	n := 0
	for _, f := range s.Files() {
		n += f.NumTensors
	}
	assert.Equal(t, len(all), n)
}
