package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifyDrafterFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "draft")
	require.NoError(t, os.Mkdir(dir, 0o755))
	src := filepath.Join("..", "..", "testdata", "models", "demo", "draft")
	for _, n := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, n))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
	}
	code, out, errs := storeRun("verify", dir)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "(a DSpark draft model)")
	assert.Contains(t, out, "2 of 2 required files ok")
	assert.Contains(t, out, "COMPLETE")

	require.NoError(t, os.Truncate(filepath.Join(dir, "model.safetensors"), 4000))
	code, out, _ = storeRun("verify", dir)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, out, "wrong-size    model.safetensors: model.safetensors is incomplete")
	assert.Contains(t, out, "INCOMPLETE: run 'k3 download "+root+" --draft'")

	code, _, errs = storeRun("verify", dir, "--layers", "2")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "holds a draft model; --layers applies to the main model only")
}
