package verify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// copyDraft copies the task model's trained drafter into a temp folder.
func copyDraft(t *testing.T) string {
	t.Helper()
	return fixture.CopyDraft(t, fixture.Path("models", "task", "draft"), nil)
}

func TestCheckFolderDrafter(t *testing.T) {
	dir := copyDraft(t)
	require.True(t, IsDraftFolder(dir))
	rep, err := CheckFolder(context.Background(), dir, Options{})
	require.NoError(t, err)
	assert.True(t, rep.Draft)
	assert.True(t, rep.Complete, "%+v", rep.Files)
	assert.Equal(t, 2, rep.Required, "config.json and model.safetensors; no tokenizer files")
	assert.Equal(t, int64(1192680)+int64(result(rep, "config.json").Size), rep.Bytes)

	// --layers is the main model's
	_, err = CheckFolder(context.Background(), dir, Options{Layers: 1})
	require.ErrorContains(t, err, "holds a draft model")

	// a config without two required fields: named, not complete
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	delete(m, "markov_rank")
	delete(m, "mask_token_id")
	b, _ := json.Marshal(m)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644))
	rep, err = CheckFolder(context.Background(), dir, Options{})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	c := result(rep, "config.json")
	assert.Equal(t, StatusUnreadable, c.Status)
	assert.Contains(t, c.Detail, "mask_token_id")
	assert.Contains(t, c.Detail, "markov_rank")
	assert.Contains(t, c.Detail, "k3 download DEST --draft")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644))

	// a cut weights file
	w := filepath.Join(dir, "model.safetensors")
	require.NoError(t, os.Truncate(w, 1_000_000))
	rep, err = CheckFolder(context.Background(), dir, Options{})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, StatusWrongSize, result(rep, "model.safetensors").Status)
	assert.Contains(t, result(rep, "model.safetensors").Detail, "model.safetensors is incomplete")
}

func TestCheckFolderDrafterSizesAndHashesFromManifest(t *testing.T) {
	dir := copyDraft(t)
	man := &Manifest{Repo: "Inferact/Kimi-K3-DSpark", Commit: "cf6b8244620e7ea4b0651d214f28e89eac75bed6"}
	for _, n := range []string{"config.json", "model.safetensors"} {
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		require.NoError(t, err)
		sum, _, err := HashFile(context.Background(), p, nil)
		require.NoError(t, err)
		man.Set(ManifestEntry{Name: n, Size: st.Size(), SHA256: sum, Commit: man.Commit, ModTime: st.ModTime().UnixNano(), Checked: CheckedSHA256})
	}
	require.NoError(t, man.Write(dir))
	rep, err := CheckFolder(context.Background(), dir, Options{SHA256: true})
	require.NoError(t, err)
	assert.True(t, rep.Complete, "%+v", rep.Files)
	assert.Equal(t, man.Commit, rep.Commit)

	// one byte changed, size intact: --sha256 finds it
	w := filepath.Join(dir, "model.safetensors")
	b, err := os.ReadFile(w)
	require.NoError(t, err)
	b[len(b)-1] ^= 1
	require.NoError(t, os.WriteFile(w, b, 0o644))
	rep, err = CheckFolder(context.Background(), dir, Options{SHA256: true})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, StatusHashMismatch, result(rep, "model.safetensors").Status)
}
