package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/hub"
	"k3/storage/verify"
)

// draftMiniHub serves hub.DraftRepo at hub.DraftRevision: a config, a
// weights file and a README; it records every path asked.
func draftMiniHub(t *testing.T) (map[string][]byte, func() []string) {
	files := map[string][]byte{
		"config.json":       []byte(`{"model_type":"k3_dspark"}`),
		"model.safetensors": []byte(strings.Repeat("ds", 50001)),
		"README.md":         []byte("readme"),
	}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/api/models/"+hub.DraftRepo+"/revision/"+hub.DraftRevision {
			var sibs []map[string]any
			for n, b := range files {
				s := sha256.Sum256(b)
				sibs = append(sibs, map[string]any{"rfilename": n, "size": len(b), "lfs": map[string]any{"sha256": hex.EncodeToString(s[:]), "size": len(b)}})
			}
			json.NewEncoder(w).Encode(map[string]any{"sha": hub.DraftRevision, "siblings": sibs})
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/"+hub.DraftRepo+"/resolve/"+hub.DraftRevision+"/")
		b, ok := files[name]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", hub.DraftRevision)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		http.ServeContent(w, r, name, time.Time{}, strings.NewReader(string(b)))
	}))
	t.Cleanup(srv.Close)
	useHub(t, srv.URL)
	return files, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

func TestDownloadDraftFetchesThePinnedRelease(t *testing.T) {
	files, _ := draftMiniHub(t)
	orig := downloadDraftPins
	t.Cleanup(func() { downloadDraftPins = orig })
	downloadDraftPins = nil
	for _, n := range []string{"config.json", "model.safetensors"} {
		s := sha256.Sum256(files[n])
		downloadDraftPins = append(downloadDraftPins, hub.RemoteFile{Name: n, Size: int64(len(files[n])), SHA256: hex.EncodeToString(s[:])})
	}
	dest := filepath.Join(t.TempDir(), "model")
	code, out, errs := storeRun("download", dest, "--draft")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "downloading "+hub.DraftRepo+"@"+hub.DraftRevision)
	assert.Contains(t, out, "[2/2]")
	assert.Contains(t, out, "--draft "+filepath.Join(dest, "draft"))
	for _, n := range []string{"config.json", "model.safetensors"} {
		got, err := os.ReadFile(filepath.Join(dest, "draft", n))
		require.NoError(t, err)
		assert.Equal(t, files[n], got)
	}
	assert.NoFileExists(t, filepath.Join(dest, "draft", "README.md"))
	m, err := verify.ReadManifest(filepath.Join(dest, "draft"))
	require.NoError(t, err)
	assert.Equal(t, hub.DraftRepo, m.Repo)
	assert.Equal(t, hub.DraftRevision, m.Commit)

	code, _, errs = storeRun("download", dest, "--draft", "--revision", "main")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "--draft fetches the pinned drafter release")
}

func TestDownloadDraftRefusesFilesUnlikeTheRelease(t *testing.T) {
	_, asked := draftMiniHub(t)
	// the real pins: the fake release's sizes differ, so nothing is fetched
	dest := filepath.Join(t.TempDir(), "model")
	code, out, errs := storeRun("download", dest, "--draft")
	assert.Equal(t, ExitRuntime, code, out)
	assert.Contains(t, errs, "lists config.json with 26 bytes, the pinned release has 1251")
	for _, p := range asked() {
		assert.NotContains(t, p, "/resolve/", "no file fetched")
	}
}
