package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
	"k3/storage/units"
	"k3/storage/verify"
	"k3/tokenizer"
)

func writeModel(t *testing.T, s synth.Spec) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, synth.Write(dir, s))
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	return dir
}

func TestCheckFolderGood(t *testing.T) {
	dir := writeModel(t, synth.Small())
	c := CheckFolder(t.Context(), dir, 0)
	assert.True(t, c.OK(), "%+v", c.Problems)
	assert.Equal(t, synth.Small().Layers, c.Layers)
	assert.Len(t, c.Shards, synth.Small().Layers+1)
	assert.NoError(t, c.Err())
}

// The walk-through's two broken folders: a shard cut to 1000 bytes and a
// config without four fields. Both are named, in plain words.
func TestCheckFolderTruncatedShardAndBadConfig(t *testing.T) {
	dir := writeModel(t, synth.Small())
	shard := filepath.Join(dir, "model-00003-of-00009.safetensors")
	whole, err := os.ReadFile(shard)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(shard, 1000))
	c := CheckFolder(t.Context(), dir, 0)
	require.Len(t, c.Problems, 1)
	assert.Equal(t, "model-00003-of-00009.safetensors", c.Problems[0].File)
	assert.Regexp(t, `^model-00003-of-00009.safetensors is incomplete: 1\.00 KB, but its header alone takes [0-9.]+ KB\. Download it again\.$`, c.Problems[0].Text)
	assert.False(t, c.OK())
	assert.EqualError(t, c.Err(), c.Problems[0].Text)

	// cut after the header: the header says how large the file must be
	require.NoError(t, os.WriteFile(shard, whole[:len(whole)/2], 0o644))
	c = CheckFolder(t.Context(), dir, 0)
	require.Len(t, c.Problems, 1)
	assert.Equal(t, "model-00003-of-00009.safetensors is incomplete: "+units.Bytes(int64(len(whole)/2))+" of "+units.Bytes(int64(len(whole)))+". Download it again.", c.Problems[0].Text)

	require.NoError(t, os.Remove(shard))
	c = CheckFolder(t.Context(), dir, 0)
	require.Len(t, c.Problems, 1)
	assert.Contains(t, c.Problems[0].Text, "model-00003-of-00009.safetensors is missing")

	dir = writeModel(t, synth.Small())
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	tc, nested := cfg["text_config"].(map[string]any)
	if !nested {
		tc = cfg
	}
	for _, k := range []string{"hidden_size", "num_hidden_layers", "num_experts", "kv_lora_rank"} {
		delete(tc, k)
	}
	raw, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644))
	c = CheckFolder(t.Context(), dir, 0)
	require.NotEmpty(t, c.Problems)
	assert.Equal(t, "config.json", c.Problems[0].File)
	for _, k := range []string{"hidden_size", "num_hidden_layers", "num_experts", "kv_lora_rank"} {
		assert.Contains(t, c.Problems[0].Text, k)
	}
	assert.Contains(t, c.Problems[0].Text, "Download config.json again")
}

func TestCheckFolderEmpty(t *testing.T) {
	c := CheckFolder(t.Context(), t.TempDir(), 0)
	assert.False(t, c.HasConfig)
	assert.False(t, c.OK())
	assert.Empty(t, c.Problems)
}

// Verify checks the folder's own shards (not the release's 96), so the cut
// shard is the one marked, with the reason.
func TestVerifyFolderOwnShards(t *testing.T) {
	dir := writeModel(t, synth.Small())
	rep, err := VerifyFolder(t.Context(), dir, 0, nil)
	require.NoError(t, err)
	assert.True(t, rep.Complete, "%+v", rep)
	assert.Equal(t, synth.Small().Layers+1+3, rep.Required) // shards + config + tokenizer files

	shard := filepath.Join(dir, "model-00003-of-00009.safetensors")
	require.NoError(t, os.Truncate(shard, 1000))
	rep, err = VerifyFolder(t.Context(), dir, 0, nil)
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, 1, rep.WrongSize)
	assert.Equal(t, rep.Required-1, rep.OK)
	var bad []string
	for _, f := range rep.Files {
		if f.Status != verify.StatusOK && f.Status != verify.StatusKnown {
			bad = append(bad, f.Name+": "+f.Detail)
		}
	}
	require.Len(t, bad, 1)
	assert.Contains(t, bad[0], "model-00003-of-00009.safetensors: model-00003-of-00009.safetensors is incomplete: 1.00 KB")
}

// The app's demo is the folder `k3 demo` writes (synth.WriteDemo, which
// ui/cli's TestDemoCommand holds `k3 demo` to), byte for byte, and is
// recognised as the demo; a complete one is kept as it is, an older one
// written again.
func TestMakeDemoModelIsTheCLIDemo(t *testing.T) {
	app := filepath.Join(t.TempDir(), "demo-model")
	require.NoError(t, MakeDemoModel(app))
	require.True(t, synth.IsDemo(app))
	want := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, synth.WriteDemo(want, "small"))
	sums := func(dir string) map[string][32]byte {
		out := map[string][32]byte{}
		require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = sha256.Sum256(b)
			return nil
		}))
		return out
	}
	got := sums(app)
	assert.Equal(t, sums(want), got)
	require.NoError(t, MakeDemoModel(app))
	assert.Equal(t, got, sums(app))
	// an older demo (its marker is an earlier version's: the demo before it
	// could see) is written again
	require.NoError(t, os.WriteFile(filepath.Join(app, synth.DemoMarker), []byte("an older demo"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(app, "config.json"), []byte("{}"), 0o644))
	require.NoError(t, MakeDemoModel(app))
	assert.Equal(t, got, sums(app))
	assert.False(t, synth.IsDemo(writeModel(t, synth.Small())), "a plain generated checkpoint is not the demo")
}

// The trunk adapter passes storage/trunk's rate and ETA through.
func TestTrunkPackerPassesRateAndETA(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, synth.Write(model, synth.Small()))
	var got []PackProgress
	require.NoError(t, trunkPacker{}.Pack(context.Background(), model, filepath.Join(t.TempDir(), "trunk"), 0, PackOptions{}, func(p PackProgress) {
		got = append(got, p)
	}))
	require.NotEmpty(t, got)
	rated := false
	for _, p := range got {
		rated = rated || p.Rate > 0
	}
	assert.True(t, rated, "no progress report carried a rate: %+v", got)
	last := got[len(got)-1]
	assert.Equal(t, last.Total, last.Done)
	assert.Equal(t, time.Duration(0), last.ETA)
}
