//go:build linux || darwin

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k3/internal/fakehub"
)

const (
	hubRepo   = "test/demo"
	hubCommit = "0123456789abcdef0123456789abcdef01234567"
	hubSecret = "hf_SECRET123faultmatrix"
)

// hubFaults are injected per file name.
type hubFaults struct {
	drop    map[string]int  // cut the connection after 100 KB, this many times
	fail500 map[string]int  // answer 500 this many times
	corrupt map[string]bool // flip a byte, always
	nohash  map[string]bool // list it with neither an LFS sha256 nor a blob id
	trickle map[string]bool // send 16 KB every 20 ms
	commit  string          // X-Repo-Commit to send ("" = the real one)
	token   string          // required bearer token
}

// fakeHub serves a model directory as a Hugging Face repository: the
// revision API with blobs=true and /resolve/ with Range, X-Repo-Commit,
// X-Linked-Size and X-Linked-Etag.
type fakeHub struct {
	files map[string][]byte
	f     hubFaults
	mu    sync.Mutex
	srv   *httptest.Server
	seen  []string // every Authorization header
}

func newFakeHub(dir string, f hubFaults) *fakeHub {
	h := &fakeHub{files: map[string][]byte{}, f: f}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			must(err)
			h.files[e.Name()] = b
		}
	}
	for _, m := range []*map[string]int{&h.f.drop, &h.f.fail500} {
		if *m == nil {
			*m = map[string]int{}
		}
	}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	return h
}

func (h *fakeHub) close() { h.srv.Close() }

func isLFS(name string) bool {
	return strings.HasSuffix(name, ".safetensors") || name == "tiktoken.model"
}

func (h *fakeHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Get("Authorization"))
	if h.f.token != "" && r.Header.Get("Authorization") != "Bearer "+h.f.token {
		h.mu.Unlock()
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	h.mu.Unlock()
	api := "/api/models/" + hubRepo + "/revision/"
	res := "/" + hubRepo + "/resolve/"
	switch {
	case strings.HasPrefix(r.URL.Path, api):
		type lfs struct {
			SHA256 string `json:"sha256"`
			Size   int    `json:"size"`
		}
		type sib struct {
			RFilename string `json:"rfilename"`
			Size      int    `json:"size"`
			BlobID    string `json:"blobId,omitempty"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		var sibs []sib
		for n, b := range h.files {
			s := sib{RFilename: n, Size: len(b), BlobID: blobID(b)}
			if isLFS(n) {
				s.BlobID = blobID([]byte("pointer " + n))
				s.LFS = &lfs{SHA256: sha(b), Size: len(b)}
			}
			if h.f.nohash[n] {
				s.BlobID, s.LFS = "", nil
			}
			sibs = append(sibs, s)
		}
		json.NewEncoder(w).Encode(map[string]any{"id": hubRepo, "sha": hubCommit, "siblings": sibs})
	case strings.HasPrefix(r.URL.Path, res):
		_, name, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, res), "/")
		b, ok := h.files[name]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no entry", http.StatusNotFound)
			return
		}
		commit := hubCommit
		if h.f.commit != "" {
			commit = h.f.commit
		}
		w.Header().Set("X-Repo-Commit", commit)
		if isLFS(name) {
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
			if !h.f.nohash[name] {
				w.Header().Set("X-Linked-Etag", `"`+sha(b)+`"`)
			}
		}
		h.bytes(w, r, name, b)
	default:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func (h *fakeHub) bytes(w http.ResponseWriter, r *http.Request, name string, b []byte) {
	h.mu.Lock()
	if h.f.fail500[name] > 0 {
		h.f.fail500[name]--
		h.mu.Unlock()
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	drop := h.f.drop[name] > 0
	if drop {
		h.f.drop[name]--
	}
	h.mu.Unlock()
	body := b
	if h.f.corrupt[name] {
		body = append([]byte(nil), b...)
		body[len(body)/3] ^= 0x55
	}
	start := 0
	rg := r.Header.Get("Range")
	if rg != "" {
		v, _ := strings.CutPrefix(rg, "bytes=")
		v, _, _ = strings.Cut(v, "-")
		start, _ = strconv.Atoi(v)
	}
	if !fakehub.Head(w, body, start, rg != "", false) {
		return
	}
	rest := body[start:]
	if drop && len(rest) > 100_000 {
		w.Write(rest[:100_000])
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
	}
	if h.f.trickle[name] {
		for len(rest) > 0 {
			n := min(len(rest), 16<<10)
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			rest = rest[n:]
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
	w.Write(rest)
}

// sha and blobID are the hashes the hub publishes (sha256, git blob id).
var sha, blobID = fakehub.SHA256, fakehub.BlobID

// sameAsHub compares every file of the hub with dest.
func (h *fakeHub) sameAsHub(dest string) error {
	for n, b := range h.files {
		got, err := os.ReadFile(filepath.Join(dest, n))
		if err != nil {
			return err
		}
		if string(got) != string(b) {
			return fmt.Errorf("%s differs from the hub's", n)
		}
	}
	return nil
}
