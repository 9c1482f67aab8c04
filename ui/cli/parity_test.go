package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// partialSet copies tiny-release without its second shard (layers 3 to 6;
// the first holds layers 0-3, the third layers 6-7 and the model tables):
// what `k3 download --layers 3` leaves, the full index kept.
func partialSet(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.CopyFS(dir, os.DirFS(tinyRelease)))
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")))
	return dir
}

func readRunReport(t *testing.T, path string) runReport {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep runReport
	require.NoError(t, json.Unmarshal(raw, &rep))
	return rep
}

func TestPartialShardSetRunsAndPacks(t *testing.T) {
	dir := partialSet(t)
	tmp := t.TempDir()
	ids := "491,109,188,458,164"

	// the full set's first 3 layers give the reference for the partial set
	full := filepath.Join(tmp, "full.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "4", "--layers", "3", "--out", full)
	require.Equal(t, ExitOK, code, out+errs)
	part := filepath.Join(tmp, "part.json")
	code, out, errs = runK3("run", dir, "--ids", ids, "--gen", "4", "--layers", "3", "--out", part)
	require.Equal(t, ExitOK, code, out+errs)
	want, got := readRunReport(t, full), readRunReport(t, part)
	assert.Equal(t, want.GeneratedIDs, got.GeneratedIDs)
	assert.Len(t, got.GeneratedIDs, 4)
	assert.Equal(t, 3, got.Layers)

	// layer 3 lives partly in the missing shard
	code, _, errs = runK3("run", dir, "--ids", ids, "--layers", "4")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "shard model-00002-of-00003.safetensors is missing: layer 3 needs language_model.model.layers.3.")
	assert.Contains(t, errs, "(--layers 4 asked; the shards present cover --layers 3)")
	code, _, errs = runK3("run", dir, "--ids", ids)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "layer 3 needs")

	// pack: the first 3 layers pack and run from the trunk, same tokens
	tr := filepath.Join(tmp, "trunk")
	code, out, errs = runK3("pack", dir, tr, "--layers", "3", "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "(embed, head, final, 3 layers)")
	assert.Contains(t, out, "--layers 3 --prompt")
	fromTrunk := filepath.Join(tmp, "trunk.json")
	code, out, errs = runK3("run", dir, "--ids", ids, "--gen", "4", "--layers", "3", "--trunk", tr, "--trunk-gb", "0.0001", "--out", fromTrunk)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, want.GeneratedIDs, readRunReport(t, fromTrunk).GeneratedIDs)
	code, _, errs = runK3("pack", dir, filepath.Join(tmp, "t2"), "--disk-test-mb", "0", "--quiet")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "k3 pack: shard model-00002-of-00003.safetensors is missing: layer 3 needs")

	// the model tables' shard missing: nothing can run
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00003-of-00003.safetensors")))
	code, _, errs = runK3("run", dir, "--ids", ids, "--layers", "1")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "shard model-00003-of-00003.safetensors is missing: it holds language_model.")
	assert.Contains(t, errs, "which every run needs")
}

func TestCSpellings(t *testing.T) {
	ids := "491,109,188,458,164"
	// --incremental: a no-op with a note; same tokens as without it
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a.json"), filepath.Join(tmp, "b.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "3", "--incremental", "--out", a)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, errs, "note: --incremental is how k3 always runs")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "3", "--out", b)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, readRunReport(t, b).GeneratedIDs, readRunReport(t, a).GeneratedIDs)

	// --tf-check is --teacher-forcing, with the agreement line
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--tf-check")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "teacher forcing: 5 positions; the argmax matches the next id at ")

	// --trunk-gb auto is --preset auto
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--trunk-gb", "auto")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "auto: preset ")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--trunk-gb=auto")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "auto: preset ")

	// --version and --list-presets after a command
	code, out, _ = runK3("run", tinyRelease, "--ids", ids, "--version")
	assert.Equal(t, ExitOK, code)
	assert.Equal(t, "k3 "+Version+"\n", out)
	code, out, _ = runK3("chat", tinyRelease, "--list-presets")
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "laptop")

	// an unknown flag: one line naming the closest known flag
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--recompte")
	assert.Equal(t, ExitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "k3 run: unknown flag --recompte; the closest is --recompute (k3 run -h lists them all)\n", errs)
	code, _, errs = runK3("pack", tinyRelease, t.TempDir(), "-compres")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 pack: unknown flag -compres; the closest is --compress (k3 pack -h lists them all)\n", errs)
	// --incremental means nothing to pack: unknown there
	code, _, errs = runK3("pack", tinyRelease, t.TempDir(), "--incremental")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "unknown flag --incremental")
}

func TestEditDistance(t *testing.T) {
	assert.Equal(t, 0, editDistance("gen", "gen"))
	assert.Equal(t, 1, editDistance("recompte", "recompute"))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
	assert.Equal(t, 4, editDistance("", "tok4"))
}
