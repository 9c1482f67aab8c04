package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/safetensors"
	"k3/storage/units"
)

// writeFolder writes a checkpoint of three shards with its own index (not
// the release's names) and the tokenizer files.
func writeFolder(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var shards [][]safetensors.WriteTensor
	wm := map[string]string{}
	for i := range 3 {
		name := "w" + string(rune('0'+i))
		shards = append(shards, []safetensors.WriteTensor{{Name: name, DType: safetensors.F32, Shape: []int64{256}, Data: make([]byte, 1024)}})
		wm[name] = safetensors.ShardName(i+1, 3)
	}
	require.NoError(t, safetensors.WriteSharded(dir, shards))
	require.NoError(t, safetensors.WriteIndex(dir, wm, 3*1024))
	for _, f := range []string{"tiktoken.model", "tokenizer_config.json"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"hidden_size": 8}`), 0o644))
	return dir
}

func result(rep *Report, name string) FileResult {
	for _, f := range rep.Files {
		if f.Name == name {
			return f
		}
	}
	return FileResult{}
}

// G17: the one check of `k3 verify` and the app: a folder's own shards, a
// damaged header and a cut shard named by the engine's strict reader, a
// config the engine cannot run named too.
func TestCheckFolderReadsHeadersAndConfig(t *testing.T) {
	dir := writeFolder(t)
	s1 := filepath.Join(dir, safetensors.ShardName(1, 3))
	s2 := filepath.Join(dir, safetensors.ShardName(2, 3))
	whole, err := os.ReadFile(s2)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(s2, whole[:len(whole)-100], 0o644))
	b, err := os.ReadFile(s1)
	require.NoError(t, err)
	i := strings.Index(string(b), `"shape"`)
	require.Positive(t, i)
	copy(b[i:], `"shaqe"`) // a damaged header
	require.NoError(t, os.WriteFile(s1, b, 0o644))

	// size checks alone pass all three: no size is recorded for these names
	plain, err := Check(t.Context(), dir, Options{Shards: []FileSpec{{safetensors.ShardName(1, 3), -1}, {safetensors.ShardName(2, 3), -1}, {safetensors.ShardName(3, 3), -1}}})
	require.NoError(t, err)
	require.Equal(t, StatusOK, result(plain, safetensors.ShardName(1, 3)).Status)

	rep, err := CheckFolder(t.Context(), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, 6, rep.Required, "the folder's 3 shards and the 3 tokenizer files, not the release's 96")
	r1 := result(rep, safetensors.ShardName(1, 3))
	assert.Equal(t, StatusUnreadable, r1.Status)
	assert.Contains(t, r1.Detail, safetensors.ShardName(1, 3)+" cannot be used:")
	r2 := result(rep, safetensors.ShardName(2, 3))
	assert.Equal(t, StatusWrongSize, r2.Status)
	assert.Equal(t, safetensors.ShardName(2, 3)+" is incomplete: "+units.Bytes(int64(len(whole)-100))+" of "+units.Bytes(int64(len(whole)))+". Download it again.", r2.Detail)
	assert.Equal(t, StatusOK, result(rep, safetensors.ShardName(3, 3)).Status)
	rc := result(rep, "config.json")
	assert.Equal(t, StatusUnreadable, rc.Status)
	assert.Contains(t, rc.Detail, "config.json does not describe a model k3 can run (")
	assert.Equal(t, 3, rep.OK)
	assert.Equal(t, 1, rep.WrongSize)
	assert.Equal(t, 2, rep.Unreadable)
	assert.False(t, rep.Complete)
}
