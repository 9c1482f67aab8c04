package hub

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k3/internal/fakehub"
)

// fakeHub imitates the Hugging Face hub's endpoints for one repository:
// the revision API with blobs=true, /resolve/ with X-Repo-Commit,
// X-Linked-Size and X-Linked-Etag, a 302 to a separate CDN server for LFS
// files, Range requests, and X-Error-Code on errors. Faults are injected per
// file.
type fakeHub struct {
	t    *testing.T
	repo string

	mu       sync.Mutex
	commits  map[string]map[string][]byte // commit -> files
	branches map[string]string            // branch -> commit
	lfs      map[string]bool              // file names stored in LFS
	token    string                       // required bearer token ("" = public)

	// faults, keyed by file name; each is consumed as it fires
	drop       map[string]int // cut the connection after this many bytes (once)
	fail500    map[string]int // answer 500 this many times
	bad416     map[string]int // answer 416 to this many range requests
	short      map[string]int // serve this many bytes fewer, always
	corrupt    map[string]int // flip a byte this many times (size intact)
	dropAlways map[string]bool
	nohash     map[string]bool // list the file with neither an LFS sha256 nor a blob id

	// what happened
	gets      map[string]int // file -> GET count (hub /resolve/)
	ranges    []string       // "file bytes=N-" for every ranged request
	authSeen  []string       // Authorization headers the hub saw
	cdnAuth   []string       // Authorization headers the CDN saw (must stay empty)
	apiCalls  []string       // revisions asked on the API
	hubServer *httptest.Server
	cdnServer *httptest.Server
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{
		t: t, repo: "moonshotai/Kimi-K3",
		commits: map[string]map[string][]byte{}, branches: map[string]string{}, lfs: map[string]bool{},
		drop: map[string]int{}, fail500: map[string]int{}, bad416: map[string]int{}, short: map[string]int{},
		corrupt: map[string]int{}, dropAlways: map[string]bool{}, nohash: map[string]bool{}, gets: map[string]int{},
	}
	h.cdnServer = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	h.hubServer = httptest.NewServer(http.HandlerFunc(h.serveHub))
	t.Cleanup(func() { h.hubServer.Close(); h.cdnServer.Close() })
	return h
}

// bytesFor makes deterministic content.
func bytesFor(name string, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(len(name)), uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// addCommit stores a commit with the standard test files and points branch at it.
func (h *fakeHub) addCommit(commit, branch string, files map[string][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits[commit] = files
	if branch != "" {
		h.branches[branch] = commit
	}
}

// standardFiles is a 3-layer, 4-shard miniature of the release.
func standardFiles(seed string) map[string][]byte {
	idx := map[string]any{
		"metadata": map[string]any{"total_size": 1},
		"weight_map": map[string]string{
			"language_model.model.layers.0.input_layernorm.weight":               "model-00001-of-000004.safetensors",
			"language_model.model.layers.1.block_sparse_moe.experts.0.w1.weight": "model-00002-of-000004.safetensors",
			"language_model.model.layers.2.self_attn.o_proj.weight":              "model-00003-of-000004.safetensors",
			"language_model.model.embed_tokens.weight":                           "model-00004-of-000004.safetensors",
			"language_model.lm_head.weight":                                      "model-00004-of-000004.safetensors",
		},
	}
	ib, _ := json.Marshal(idx)
	return map[string][]byte{
		"config.json":                       []byte(`{"model_type":"kimi_k3","seed":"` + seed + `"}`),
		"tokenizer_config.json":             []byte(`{"added_tokens_decoder":{}}`),
		"tiktoken.model":                    bytesFor("tiktoken"+seed, 70_001),
		"model.safetensors.index.json":      ib,
		"model-00001-of-000004.safetensors": bytesFor("s1"+seed, 1_300_007),
		"model-00002-of-000004.safetensors": bytesFor("s2"+seed, 2_100_000),
		"model-00003-of-000004.safetensors": bytesFor("s3"+seed, 900_123),
		"model-00004-of-000004.safetensors": bytesFor("s4"+seed, 1_048_576),
	}
}

// sha and blobID are the hashes the hub publishes (sha256, git blob id).
var sha, blobID = fakehub.SHA256, fakehub.BlobID

func (h *fakeHub) authorized(w http.ResponseWriter, r *http.Request) bool {
	a := r.Header.Get("Authorization")
	h.authSeen = append(h.authSeen, a)
	if h.token == "" || a == "Bearer "+h.token {
		return true
	}
	w.Header().Set("X-Error-Code", "GatedRepo")
	w.Header().Set("X-Error-Message", "Access to model "+h.repo+" is restricted.")
	http.Error(w, "unauthorized", http.StatusUnauthorized)
	return false
}

func (h *fakeHub) resolve(rev string) (string, map[string][]byte, bool) {
	if c, ok := h.branches[rev]; ok {
		rev = c
	}
	files, ok := h.commits[rev]
	return rev, files, ok
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	apiPrefix := "/api/models/" + h.repo + "/revision/"
	resolvePrefix := "/" + h.repo + "/resolve/"
	switch {
	case strings.HasPrefix(r.URL.Path, apiPrefix):
		if !h.authorized(w, r) {
			return
		}
		rev := strings.TrimPrefix(r.URL.Path, apiPrefix)
		h.apiCalls = append(h.apiCalls, rev)
		commit, files, ok := h.resolve(rev)
		if !ok {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "Invalid rev id: "+rev, http.StatusNotFound)
			return
		}
		if r.URL.Query().Get("blobs") != "true" {
			h.t.Errorf("revision API called without blobs=true")
		}
		type lfs struct {
			SHA256      string `json:"sha256"`
			Size        int    `json:"size"`
			PointerSize int    `json:"pointerSize"`
		}
		type sib struct {
			RFilename string `json:"rfilename"`
			Size      int    `json:"size"`
			BlobID    string `json:"blobId"`
			LFS       *lfs   `json:"lfs,omitempty"`
		}
		var sibs []sib
		for n, b := range files {
			s := sib{RFilename: n, Size: len(b), BlobID: blobID(b)}
			if h.lfs[n] || strings.HasSuffix(n, ".safetensors") || n == "tiktoken.model" {
				s.BlobID = blobID([]byte("pointer " + n))
				s.LFS = &lfs{SHA256: sha(b), Size: len(b), PointerSize: 134}
			}
			if h.nohash[n] {
				s.BlobID, s.LFS = "", nil
			}
			sibs = append(sibs, s)
		}
		json.NewEncoder(w).Encode(map[string]any{"_id": "x", "id": h.repo, "sha": commit, "siblings": sibs})
	case strings.HasPrefix(r.URL.Path, resolvePrefix):
		if !h.authorized(w, r) {
			return
		}
		rest := strings.TrimPrefix(r.URL.Path, resolvePrefix)
		rev, name, _ := strings.Cut(rest, "/")
		commit, files, ok := h.resolve(rev)
		if !ok {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, "no rev", http.StatusNotFound)
			return
		}
		b, ok := files[name]
		if !ok {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			http.Error(w, "no entry", http.StatusNotFound)
			return
		}
		h.gets[name]++
		w.Header().Set("X-Repo-Commit", commit)
		isLFS := strings.HasSuffix(name, ".safetensors") || name == "tiktoken.model"
		if isLFS {
			w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
			if !h.nohash[name] {
				w.Header().Set("X-Linked-Etag", `"`+sha(b)+`"`)
			}
			w.Header().Set("ETag", `"`+blobID([]byte("pointer "+name))+`"`)
			w.Header().Set("Location", h.cdnServer.URL+"/blobs/"+commit+"/"+name+"?X-Amz-Signature=abc")
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+blobID(b)+`"`)
		h.serveBytes(w, r, name, b)
	default:
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
	}
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := r.Header.Get("Authorization"); a != "" {
		h.cdnAuth = append(h.cdnAuth, a)
	}
	rest := strings.TrimPrefix(r.URL.Path, "/blobs/")
	commit, name, _ := strings.Cut(rest, "/")
	b, ok := h.commits[commit][name]
	if !ok {
		http.Error(w, "no blob", http.StatusNotFound)
		return
	}
	h.serveBytes(w, r, name, b)
}

// serveBytes answers a GET with optional "Range: bytes=N-", applying faults.
// Called with h.mu held.
func (h *fakeHub) serveBytes(w http.ResponseWriter, r *http.Request, name string, b []byte) {
	if h.fail500[name] > 0 {
		h.fail500[name]--
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	body := b
	if h.corrupt[name] > 0 {
		h.corrupt[name]--
		body = append([]byte(nil), b...)
		body[len(body)/3] ^= 0x55
	}
	if n := h.short[name]; n > 0 {
		body = body[:len(body)-n]
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		h.ranges = append(h.ranges, name+" "+rg)
		v, ok := strings.CutPrefix(rg, "bytes=")
		v, _, _ = strings.Cut(v, "-")
		s, err := strconv.Atoi(v)
		if !ok || err != nil {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		refuse := h.bad416[name] > 0
		if refuse {
			h.bad416[name]--
		}
		if !fakehub.Head(w, body, s, true, refuse) {
			return
		}
		start = s
	} else {
		fakehub.Head(w, body, 0, false, false)
	}
	out := body[start:]
	if cut, ok := h.drop[name]; ok && cut < len(out) || h.dropAlways[name] {
		if h.dropAlways[name] {
			cut = 1000
		}
		delete(h.drop, name)
		w.Write(out[:cut])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // the connection is cut mid-body
	}
	w.Write(out)
}
