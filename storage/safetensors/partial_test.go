package safetensors

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// TestOpenPartial: a set whose index names a shard the directory lacks is
// refused by Open and opened by OpenPartial, which lists that shard's
// tensors as absent (in the index's order) and keeps the present ones.
func TestOpenPartial(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.CopyFS(dir, os.DirFS(fixture.ModelDir("tiny-release"))))
	full, err := Open(dir)
	require.NoError(t, err)
	assert.Empty(t, full.Absent())
	n := full.Len()
	full.Close()

	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")))
	_, err = Open(dir)
	require.ErrorContains(t, err, "1 shard(s) named by the index are missing from the directory: model-00002-of-00003.safetensors")

	s, err := OpenPartial(dir)
	require.NoError(t, err)
	absent := s.Absent()
	require.NotEmpty(t, absent)
	assert.Equal(t, n, s.Len()+len(absent))
	assert.Len(t, s.Files(), 2)
	for _, a := range absent {
		assert.Equal(t, "model-00002-of-00003.safetensors", a.Shard)
		_, present := s.Get(a.Name)
		assert.False(t, present, a.Name)
	}
	_, ok := s.Get("language_model.model.embed_tokens.weight")
	assert.True(t, ok)
	s.Close() // (Windows removes no open file)

	// no named shard present at all: refused
	for _, f := range []string{"model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors"} {
		require.NoError(t, os.Remove(filepath.Join(dir, f)))
	}
	_, err = OpenPartial(dir)
	require.ErrorContains(t, err, "3 shard(s) named by the index are missing")
}
