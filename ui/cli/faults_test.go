package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	st "k3/storage/safetensors"
)

// copyModel copies a model directory into a fresh temporary one.
func copyModel(t *testing.T, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	return dir
}

// patchTensor overwrites bytes of a tensor's data in place.
func patchTensor(t *testing.T, dir, tensor string, off int64, b []byte) {
	t.Helper()
	set, err := st.Open(dir)
	require.NoError(t, err)
	tn, ok := set.Get(tensor)
	require.True(t, ok, tensor)
	path, at := tn.Path, tn.Offset+off
	set.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Audit D7 (rows 1.7, 1.8): NaN weights fail the run with exit 1, naming
// the layer, instead of printing token 0 with exit 0.
func TestRunRefusesNonFiniteOutput(t *testing.T) {
	dir := copyModel(t, tinyRelease)
	patchTensor(t, dir, "language_model.model.layers.1.input_layernorm.weight", 0, []byte{0xC0, 0x7F})
	out := filepath.Join(t.TempDir(), "o.json")
	code, _, errs := runK3("run", dir, "--ids", "1,2,3", "--gen", "2", "--out", out)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "non-finite values (NaN or Inf) first appeared in the output of layer 1 (model.layers.1.*)")
}
