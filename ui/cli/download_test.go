package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k3/storage/hub"
	"k3/storage/verify"
)

// storeMiniHub serves one commit of three files the way the hub does
// (revision API with blobs, /resolve/ with X-Repo-Commit, X-Linked-Size,
// X-Linked-Etag), requiring a bearer token, with one 500 on the first
// shard request.
func storeMiniHub(t *testing.T, token string) (*httptest.Server, map[string][]byte) {
	commit := strings.Repeat("c", 40)
	files := map[string][]byte{
		"config.json":                       []byte(`{"a":1}`),
		"model-00001-of-000002.safetensors": []byte(strings.Repeat("xyz", 400000)),
		"model-00002-of-000002.safetensors": []byte(strings.Repeat("k3", 300001)),
	}
	failed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/models/moonshotai/Kimi-K3/revision/") {
			var sibs []map[string]any
			for n, b := range files {
				s := sha256.Sum256(b)
				sibs = append(sibs, map[string]any{"rfilename": n, "size": len(b), "lfs": map[string]any{"sha256": hex.EncodeToString(s[:]), "size": len(b)}})
			}
			json.NewEncoder(w).Encode(map[string]any{"sha": commit, "siblings": sibs})
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/moonshotai/Kimi-K3/resolve/"+commit+"/")
		b, ok := files[name]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		if name == "model-00001-of-000002.safetensors" && !failed {
			failed = true
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		s := sha256.Sum256(b)
		w.Header().Set("X-Repo-Commit", commit)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(s[:])+`"`)
		http.ServeContent(w, r, name, time.Time{}, strings.NewReader(string(b)))
	}))
	t.Cleanup(srv.Close)
	return srv, files
}

// useHub points k3 download at the hub at url, with no token of the
// user's and retries a millisecond apart, until t ends.
func useHub(t *testing.T, url string) {
	t.Helper()
	orig := downloadNewClient
	t.Cleanup(func() { downloadNewClient = orig })
	downloadNewClient = func(endpoint, repo string) *hub.Client {
		c := hub.NewClient(endpoint, repo)
		c.Backoff = func(int) time.Duration { return time.Millisecond }
		return c
	}
	t.Setenv("HF_ENDPOINT", url)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", filepath.Join(t.TempDir(), "none"))
}

func TestDownloadCommand(t *testing.T) {
	const token = "hf_CLItokenSECRET42"
	srv, files := storeMiniHub(t, token)
	useHub(t, srv.URL)
	dest := filepath.Join(t.TempDir(), "model")

	code, out, errs := storeRun("download", dest)
	if code != ExitUsage || !strings.Contains(errs, "HTTP 401") || !strings.Contains(errs, "HF_TOKEN") {
		t.Fatalf("no token: %d\n%s\n%s", code, out, errs)
	}
	t.Setenv("HF_TOKEN", token)
	code, out, errs = storeRun("download", dest, "--jobs", "2", "--progress", "1ms")
	if code != ExitOK {
		t.Fatalf("download: %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "[3/3]") || !strings.Contains(out, "attempt 1 failed (hub answered HTTP 500") || !strings.Contains(out, "next: k3 verify") {
		t.Fatalf("output:\n%s", out)
	}
	for n, b := range files {
		got, err := os.ReadFile(filepath.Join(dest, n))
		if err != nil || string(got) != string(b) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if strings.Contains(out+errs, token) {
		t.Fatal("token printed")
	}
	ents, _ := os.ReadDir(dest)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dest, e.Name()))
		if strings.Contains(string(b), token) {
			t.Fatalf("token written into %s", e.Name())
		}
	}
	m, err := verify.ReadManifest(dest)
	if err != nil || len(m.Files) != 3 || m.Commit != strings.Repeat("c", 40) {
		t.Fatalf("manifest: %v %+v", err, m)
	}
	// Re-run: nothing fetched.
	code, out, _ = storeRun("download", dest)
	if code != ExitOK || !strings.Contains(out, "0 fetched") || !strings.Contains(out, "3 already verified") {
		t.Fatalf("re-run: %d\n%s", code, out)
	}
	if code, _, _ := storeRun("download"); code != ExitUsage {
		t.Fatalf("no dest: %d", code)
	}
	if code, _, _ := storeRun("download", dest, "--jobs", "0"); code != ExitUsage {
		t.Fatalf("jobs 0: %d", code)
	}
	_ = fmt.Sprint
}
