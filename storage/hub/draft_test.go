package hub

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/verify"
)

// draftHub serves a miniature drafter release: config.json (a small git
// file, no LFS sha256 listed), model.safetensors (LFS) and a README that a
// pinned download must not fetch.
func draftHub(t *testing.T) (*fakeHub, map[string][]byte) {
	h := newFakeHub(t)
	h.repo = DraftRepo
	files := map[string][]byte{
		"config.json":       []byte(`{"model_type":"k3_dspark","architectures":["K3DSparkModel"]}`),
		"model.safetensors": bytesFor("draft", 300_001),
		"README.md":         []byte("# drafter\n"),
	}
	h.addCommit(commitA, "main", files)
	return h, files
}

func pinsFor(files map[string][]byte) []RemoteFile {
	return []RemoteFile{
		{Name: "config.json", Size: int64(len(files["config.json"])), SHA256: sha(files["config.json"])},
		{Name: "model.safetensors", Size: int64(len(files["model.safetensors"])), SHA256: sha(files["model.safetensors"])},
	}
}

func TestDownloadPinnedDrafter(t *testing.T) {
	h, files := draftHub(t)
	dest := filepath.Join(t.TempDir(), "draft")
	res, err := client(h).Download(context.Background(), Options{Dest: dest, Revision: commitA, Pinned: pinsFor(files)})
	require.NoError(t, err)
	require.Len(t, res.Files, 2)
	for _, f := range res.Files {
		got, err := os.ReadFile(filepath.Join(dest, f.Name))
		require.NoError(t, err)
		assert.Equal(t, files[f.Name], got, f.Name)
		assert.Equal(t, sha(files[f.Name]), f.SHA256, f.Name)
		assert.False(t, f.SizeOnly, f.Name)
	}
	assert.NoFileExists(t, filepath.Join(dest, "README.md"))
	man, err := verify.ReadManifest(dest)
	require.NoError(t, err)
	assert.Equal(t, DraftRepo, man.Repo)
	e, ok := man.Lookup("config.json")
	require.True(t, ok)
	assert.Equal(t, verify.CheckedSHA256, e.Checked, "the small config is checked against the pinned sha256, not only its blob id")
}

func TestDownloadPinnedDrafterRefusesOtherContent(t *testing.T) {
	h, files := draftHub(t)
	// the hub lists a different size than the pin: refused before any file
	pins := pinsFor(files)
	pins[1].Size++
	_, err := client(h).Download(context.Background(), Options{Dest: t.TempDir(), Revision: commitA, Pinned: pins})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lists model.safetensors with 300001 bytes, the pinned release has 300002")
	assert.Zero(t, h.gets["model.safetensors"]+h.gets["config.json"])

	// the hub lists a different LFS sha256 than the pin: refused
	pins = pinsFor(files)
	pins[1].SHA256 = sha([]byte("other"))
	_, err = client(h).Download(context.Background(), Options{Dest: t.TempDir(), Revision: commitA, Pinned: pins})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "lists model.safetensors with sha256 "+sha(files["model.safetensors"]))

	// a pinned file the release lacks
	pins = append(pinsFor(files), RemoteFile{Name: "extra.bin", Size: 1, SHA256: sha([]byte("x"))})
	_, err = client(h).Download(context.Background(), Options{Dest: t.TempDir(), Revision: commitA, Pinned: pins})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no extra.bin, which the pinned release has")

	// the config's content differs from the pin though its size and blob id
	// agree with the hub: the pinned sha256 catches it
	pins = pinsFor(files)
	pins[0].SHA256 = sha([]byte("another config"))
	_, err = client(h).Download(context.Background(), Options{Dest: t.TempDir(), Revision: commitA, Pinned: pins})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config.json: downloaded twice and the content is still wrong (sha256 "+sha(files["config.json"]))
}

func TestDraftPinsAreTheDocumentedRelease(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "DSPARK.md"))
	require.NoError(t, err)
	assert.Contains(t, string(doc), DraftRevision)
	assert.Contains(t, string(doc), "`"+DraftRepo+"`")
	require.Len(t, DraftFiles, 2)
	for _, f := range DraftFiles {
		assert.Contains(t, string(doc), f.SHA256, f.Name)
	}
	assert.Contains(t, string(doc), "7,124,633,450 bytes")
	assert.Contains(t, string(doc), "1,251 bytes")
	assert.Equal(t, int64(7_124_633_450), DraftFiles[1].Size)
	assert.Equal(t, int64(1251), DraftFiles[0].Size)
}
