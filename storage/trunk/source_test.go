package trunk

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/safetensors"
)

// copyDir copies a model directory (new files: new modification times).
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	return dir
}

// retouch rewrites bytes of a tensor's data in place (a fine-tune of the
// same layout: names, sizes and headers unchanged) and gives the file a
// later modification time.
func retouch(t *testing.T, dir, tensor string) string {
	t.Helper()
	set, err := safetensors.Open(dir)
	require.NoError(t, err)
	tn, ok := set.Get(tensor)
	require.True(t, ok)
	path, off, size := tn.Path, tn.Offset, tn.Size
	set.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, size)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0x01
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(path, later, later))
	return filepath.Base(path)
}

// Audit D2 (rows 1.116, 1.117): a trunk packed from one checkpoint is
// refused for a same-layout checkpoint with other weights, by run and by
// pack, naming the file; --force repacks.
func TestFineTuneOfTheSameLayoutIsRefused(t *testing.T) {
	orig := copyDir(t, tinyRelease)
	tdir := packed(t, orig)
	before, err := os.ReadFile(filepath.Join(tdir, ManifestFile))
	require.NoError(t, err)

	ft := copyDir(t, orig)
	file := retouch(t, ft, "language_model.model.layers.2.self_attn.o_proj.weight")

	tr, err := Open(tdir)
	require.NoError(t, err)
	err = tr.CheckSource(ft)
	tr.Close()
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), file+" was modified after the trunk in "+tdir+" was packed from it")
	assert.Contains(t, err.Error(), "run k3 pack MODEL_DIR "+tdir)

	_, err = Pack(context.Background(), ft, tdir, Options{})
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), file+" changed after the trunk in "+tdir+" was packed: run layer.2")
	assert.Contains(t, err.Error(), "use --force to repack")
	after, _ := os.ReadFile(filepath.Join(tdir, ManifestFile))
	assert.Equal(t, string(before), string(after), "a refused pack leaves trunk.json alone")

	res := pack(t, ft, tdir, Options{Force: true})
	assert.False(t, res.UpToDate)
	checkTrunk(t, ft, tdir)
	tr, err = Open(tdir)
	require.NoError(t, err)
	assert.NoError(t, tr.CheckSource(ft))
	tr.Close()
}

// A checkpoint whose files were only touched (copied, restored) is
// compared once by pack and kept: trunk.bin is not rewritten.
func TestTouchedCheckpointIsComparedAndKept(t *testing.T) {
	orig := copyDir(t, tinyRelease)
	tdir := packed(t, orig)
	binBefore, err := os.Stat(filepath.Join(tdir, BinFile))
	require.NoError(t, err)
	same := copyDir(t, orig)
	later := time.Now().Add(time.Hour)
	shard := filepath.Join(same, safetensors.ShardName(2, 3))
	require.NoError(t, os.Chtimes(shard, later, later))

	tr, err := Open(tdir)
	require.NoError(t, err)
	require.ErrorIs(t, tr.CheckSource(same), ErrSourceMismatch)
	tr.Close()

	res := pack(t, same, tdir, Options{})
	assert.True(t, res.UpToDate)
	require.Len(t, res.Notes, 1)
	assert.Contains(t, res.Notes[0], "match the packed ones")
	assert.Zero(t, res.BytesWritten)
	binAfter, _ := os.Stat(filepath.Join(tdir, BinFile))
	assert.True(t, binAfter.ModTime().Equal(binBefore.ModTime()), "trunk.bin rewritten")
	tr, err = Open(tdir)
	require.NoError(t, err)
	assert.NoError(t, tr.CheckSource(same))
	tr.Close()
	checkTrunk(t, same, tdir)
}

// A version 1 trunk.json (names and sizes only) is refused by Open and
// brought up to date by pack after comparing the content.
func TestLegacyTrunkIsCheckedAndUpgraded(t *testing.T) {
	tdir := packed(t, tinyRelease)
	mp := filepath.Join(tdir, ManifestFile)
	var m map[string]any
	raw, _ := os.ReadFile(mp)
	require.NoError(t, json.Unmarshal(raw, &m))
	m["version"] = 1
	for _, f := range m["source"].(map[string]any)["files"].([]any) {
		delete(f.(map[string]any), "mtime_ns")
		delete(f.(map[string]any), "header_sha256")
	}
	delete(m["source"].(map[string]any), "weights_sha256")
	v1, _ := json.Marshal(m)
	require.NoError(t, os.WriteFile(mp, v1, 0o644))

	_, err := Open(tdir)
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), "written by an older k3")

	res := pack(t, tinyRelease, tdir, Options{})
	assert.True(t, res.UpToDate)
	assert.Contains(t, res.Notes[0], "trunk.json was written by an older k3: 11 run(s) gathered again")
	checkTrunk(t, tinyRelease, tdir)
	upgraded, _ := os.ReadFile(mp)
	assert.Equal(t, string(raw), string(upgraded), "the upgrade writes what a fresh pack writes")
}

// Audit N10 (Z11f): a fine-tune of the same layout whose shards carry the
// original files' modification times is refused for the old trunk (the
// weights fingerprint differs), by run and by pack; --force repacks.
func TestFineTuneWithRestoredTimesIsRefused(t *testing.T) {
	orig := copyDir(t, tinyRelease)
	tdir := packed(t, orig)
	ft := copyDir(t, orig)
	retouch(t, ft, "language_model.model.layers.2.self_attn.o_proj.weight")
	ents, err := os.ReadDir(orig)
	require.NoError(t, err)
	for _, e := range ents { // touch -r: every file gets the original's times back
		fi, err := os.Stat(filepath.Join(orig, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.Chtimes(filepath.Join(ft, e.Name()), fi.ModTime(), fi.ModTime()))
	}

	tr, err := Open(tdir)
	require.NoError(t, err)
	err = tr.CheckSource(ft)
	tr.Close()
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), "the trunk in "+tdir+" was packed from different weights")
	assert.Contains(t, err.Error(), "pack again: k3 pack MODEL_DIR "+tdir+" --force")

	_, err = Pack(context.Background(), ft, tdir, Options{})
	require.ErrorIs(t, err, ErrSourceMismatch)
	assert.Contains(t, err.Error(), "run layer.2 gathered from it now has CRC-32C")

	pack(t, ft, tdir, Options{Force: true})
	tr, err = Open(tdir)
	require.NoError(t, err)
	assert.NoError(t, tr.CheckSource(ft))
	assert.ErrorIs(t, tr.CheckSource(orig), ErrSourceMismatch, "and now the original is refused")
	tr.Close()
}

// A version 3 trunk (no weights fingerprint) is refused when bound, with
// what to do; pack compares its runs, keeps trunk.bin and records the
// fingerprint (version 4), after which it binds.
func TestVersion3TrunkIsCheckedAndUpgraded(t *testing.T) {
	for _, compress := range []bool{false, true} {
		tdir := t.TempDir()
		pack(t, tinyRelease, tdir, Options{Compress: compress})
		mp := filepath.Join(tdir, ManifestFile)
		raw, _ := os.ReadFile(mp)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		assert.EqualValues(t, 4, m["version"])
		m["version"] = 3
		delete(m["source"].(map[string]any), "weights_sha256")
		v3, _ := json.Marshal(m)
		require.NoError(t, os.WriteFile(mp, v3, 0o644))

		tr, err := Open(tdir)
		require.NoError(t, err, "a version 3 trunk is read")
		err = tr.CheckSource(tinyRelease)
		tr.Close()
		require.ErrorIs(t, err, ErrSourceMismatch)
		assert.Contains(t, err.Error(), "written by an older k3 (version 3) that did not fingerprint the weights: run k3 pack MODEL_DIR "+tdir)

		res := pack(t, tinyRelease, tdir, Options{Compress: compress})
		assert.True(t, res.UpToDate)
		assert.Zero(t, res.BytesWritten)
		require.Len(t, res.Notes, 1)
		assert.Contains(t, res.Notes[0], "trunk.json was written by an older k3: 11 run(s) gathered again")
		upgraded, _ := os.ReadFile(mp)
		assert.Equal(t, string(raw), string(upgraded), "the upgrade writes what a fresh pack writes")
		tr, err = Open(tdir)
		require.NoError(t, err)
		assert.NoError(t, tr.CheckSource(tinyRelease))
		tr.Close()

		// a version 3 trunk.json with a fingerprint is not one k3 wrote
		m["source"].(map[string]any)["weights_sha256"] = "00"
		bad, _ := json.Marshal(m)
		_, err = ParseManifest(bad)
		require.ErrorContains(t, err, "weights_sha256 is not part of version 3")
	}
}

// Audit D13 (row 2.10): trunk.json's dtypes and shapes are checked against
// the checkpoint's headers.
func TestTrunkTensorsCrossCheckedWithTheCheckpoint(t *testing.T) {
	tdir := packed(t, tinyRelease)
	mp := filepath.Join(tdir, ManifestFile)
	raw, _ := os.ReadFile(mp)
	for name, edit := range map[string]func(ts map[string]any){
		"dtype": func(ts map[string]any) { ts["dtype"] = "F16" },
		"shape": func(ts map[string]any) { ts["shape"] = []any{ts["shape"].([]any)[1], ts["shape"].([]any)[0]} },
	} {
		b, tname := editFirstTensor(t, raw, func(ts map[string]any) bool {
			s := ts["shape"].([]any)
			return len(s) == 2 && ts["dtype"] == "BF16" && s[0] != s[1]
		}, edit)
		err := sourceMismatch(t, tdir, b, tname, name)
		assert.Contains(t, err.Error(), "in trunk.json", name)
	}
}

// editFirstTensor decodes the manifest raw (numbers kept exact: the
// mtimes), applies edit to the first tensor pick chooses, and returns the
// manifest's JSON and the tensor's name.
func editFirstTensor(t *testing.T, raw []byte, pick func(ts map[string]any) bool, edit func(ts map[string]any)) ([]byte, string) {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m))
	var tname string
	for _, r := range m["runs"].([]any) {
		for _, x := range r.(map[string]any)["tensors"].([]any) {
			if ts := x.(map[string]any); tname == "" && pick(ts) {
				tname = ts["name"].(string)
				edit(ts)
			}
		}
	}
	require.NotEmpty(t, tname)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b, tname
}

// sourceMismatch writes the manifest b into the trunk dir and requires the
// trunk to open (the manifest is consistent in itself) but its check
// against tiny-release to fail with ErrSourceMismatch naming tensor tname
// (the failure of case name); it returns that error.
func sourceMismatch(t *testing.T, dir string, b []byte, tname, name string) error {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), b, 0o644))
	tr, err := Open(dir)
	require.NoError(t, err, "%s: the manifest is consistent in itself", name)
	err = tr.CheckSource(tinyRelease)
	tr.Close()
	require.ErrorIs(t, err, ErrSourceMismatch, name)
	assert.Contains(t, err.Error(), "tensor "+tname+" is ", name)
	return err
}

// An interrupted pack whose checkpoint file changed before the resume
// packs the runs from that file again instead of keeping them.
func TestResumeRepacksRunsOfAModifiedFile(t *testing.T) {
	model := copyDir(t, tinyRelease)
	tdir := t.TempDir()
	packCancelled(t, model, tdir, 0, func(p Progress) bool { return p.Phase == PhasePack && p.RunsDone == 9 })
	retouch(t, model, "language_model.model.layers.0.input_layernorm.weight")
	res := pack(t, model, tdir, Options{})
	require.NotEmpty(t, res.Notes)
	assert.Contains(t, res.Notes[0], "came from files modified since: packing them again")
	checkTrunk(t, model, tdir)
	tr, err := Open(tdir)
	require.NoError(t, err)
	assert.NoError(t, tr.CheckSource(model))
	tr.Close()
}
