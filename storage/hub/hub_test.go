package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/storage/verify"
)

const (
	commitA = "1111111111111111111111111111111111111111"
	commitB = "2222222222222222222222222222222222222222"
	secret  = "hf_TESTSECRETtokenVALUE0123456789"
)

// eventLog records every event as text (to search for the token) and the
// retries.
type eventLog struct {
	mu      sync.Mutex
	lines   []string
	retries int
	done    map[string]bool
	last    Snapshot
}

func (l *eventLog) fn(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %d %v %s %+v %#v", e.Kind, e.File, e.Attempt, e.Err, e.Message, e.Snap, e))
	if e.Kind == EventRetry {
		l.retries++
	}
	if e.Kind == EventFileDone {
		if l.done == nil {
			l.done = map[string]bool{}
		}
		l.done[e.File] = true
	}
	l.last = e.Snap
}

func (l *eventLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func client(h *fakeHub) *Client {
	c := NewClient(h.hubServer.URL, h.repo)
	c.Token = Token{}
	c.Backoff = func(int) time.Duration { return time.Millisecond }
	c.Retries = 4
	return c
}

// checkSet asserts dest holds exactly the files of commit, verified by
// size and sha256 through storage/verify and byte for byte.
func checkSet(t *testing.T, h *fakeHub, dest, commit string, names []string) {
	t.Helper()
	files := h.commits[commit]
	var shards []verify.FileSpec
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(dest, n))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if string(got) != string(files[n]) {
			t.Fatalf("%s: content differs (%d vs %d bytes)", n, len(got), len(files[n]))
		}
		if strings.HasSuffix(n, ".safetensors") {
			shards = append(shards, verify.FileSpec{Name: n, Size: int64(len(files[n]))})
		}
	}
	rep, err := verify.Check(context.Background(), dest, verify.Options{SHA256: true, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || rep.HashBad != 0 || rep.Partial != 0 {
		t.Fatalf("verify: complete=%v ok=%d/%d hashbad=%d partial=%d files=%+v", rep.Complete, rep.OK, rep.Required, rep.HashBad, rep.Partial, rep.Files)
	}
	if rep.Commit != commit {
		t.Fatalf("manifest commit %s, want %s", rep.Commit, commit)
	}
	matches, _ := filepath.Glob(filepath.Join(dest, "*.part"))
	if len(matches) > 0 {
		t.Fatalf("leftover .part files: %v", matches)
	}
}

func allNames(h *fakeHub, commit string) []string {
	var n []string
	for k := range h.commits[commit] {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func TestDownloadCleanThenNothingRefetched(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	dest := filepath.Join(t.TempDir(), "model")
	var log eventLog
	res, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn, Interval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if res.Commit != commitA || res.Fetched != res.Total || len(res.Files) != 8 {
		t.Fatalf("result %+v", res)
	}
	if log.last.FilesDone != 8 || log.last.Done != res.Total {
		t.Fatalf("final snapshot %+v", log.last)
	}
	if len(h.cdnAuth) != 0 {
		t.Fatalf("the CDN saw an Authorization header: %v", h.cdnAuth)
	}
	// Re-run: nothing is fetched again; finished files are not touched.
	before := h.gets["model-00002-of-000004.safetensors"]
	st1, _ := os.Stat(filepath.Join(dest, "model-00002-of-000004.safetensors"))
	res, err = client(h).Download(context.Background(), Options{Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(filepath.Join(dest, "model-00002-of-000004.safetensors"))
	if res.Fetched != 0 || h.gets["model-00002-of-000004.safetensors"] != before || !os.SameFile(st1, st2) || st1.ModTime() != st2.ModTime() {
		t.Fatalf("re-run fetched %d bytes", res.Fetched)
	}
	for _, f := range res.Files {
		if !f.Skipped {
			t.Fatalf("%s not skipped on re-run", f.Name)
		}
	}
}

func TestConnectionDroppedMidFileResumesWithRange(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	h.drop["model-00002-of-000004.safetensors"] = 777_777
	h.drop["config.json"] = 10
	dest := t.TempDir()
	var log eventLog
	if _, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	found := false
	for _, r := range h.ranges {
		if r == "model-00002-of-000004.safetensors bytes=777777-" {
			found = true
		}
	}
	if !found || log.retries < 2 {
		t.Fatalf("no resume at the cut: ranges=%v retries=%d", h.ranges, log.retries)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	h.fail500["model-00001-of-000004.safetensors"] = 2
	h.fail500["tokenizer_config.json"] = 1
	dest := t.TempDir()
	var log eventLog
	if _, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if log.retries != 3 {
		t.Fatalf("retries %d, want 3", log.retries)
	}
	// A server that keeps failing ends in a clear error, and no final file.
	h2 := newFakeHub(t)
	h2.addCommit(commitA, "main", standardFiles("a"))
	h2.fail500["model-00003-of-000004.safetensors"] = 1000
	dest2 := t.TempDir()
	_, err := client(h2).Download(context.Background(), Options{Dest: dest2})
	if err == nil || !strings.Contains(err.Error(), "giving up") || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "model-00003") {
		t.Fatalf("persistent 500: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dest2, "model-00003-of-000004.safetensors")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a failed file got its final name")
	}
}

func TestCompletePartAnd416(t *testing.T) {
	h := newFakeHub(t)
	files := standardFiles("a")
	h.addCommit(commitA, "main", files)
	dest := t.TempDir()
	// A complete .part (crash between download and rename): no request at all.
	os.WriteFile(filepath.Join(dest, "model-00004-of-000004.safetensors.part"), files["model-00004-of-000004.safetensors"], 0o644)
	// A half .part whose range request the CDN refuses with 416 once.
	os.WriteFile(filepath.Join(dest, "model-00001-of-000004.safetensors.part"), files["model-00001-of-000004.safetensors"][:500_000], 0o644)
	h.bad416["model-00001-of-000004.safetensors"] = 1
	// A .part longer than the file.
	os.WriteFile(filepath.Join(dest, "config.json.part"), make([]byte, 5000), 0o644)
	if _, err := client(h).Download(context.Background(), Options{Dest: dest}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if n := h.gets["model-00004-of-000004.safetensors"]; n != 0 {
		t.Fatalf("complete .part was downloaded again (%d GETs)", n)
	}
	if n := h.gets["model-00001-of-000004.safetensors"]; n != 2 {
		t.Fatalf("416 file: %d GETs, want 2 (416, then a full fetch)", n)
	}
	// A server that always refuses ranges ends in a clear error.
	h2 := newFakeHub(t)
	h2.addCommit(commitA, "main", files)
	d2 := t.TempDir()
	os.WriteFile(filepath.Join(d2, "model-00001-of-000004.safetensors.part"), files["model-00001-of-000004.safetensors"][:4096], 0o644)
	h2.bad416["model-00001-of-000004.safetensors"] = 1000
	h2.dropAlways["model-00001-of-000004.safetensors"] = true
	_, err := client(h2).Download(context.Background(), Options{Dest: d2, Files: []string{"model-00001-of-000004.safetensors"}})
	if err == nil || !strings.Contains(err.Error(), "416") {
		t.Fatalf("persistent 416: %v", err)
	}
}

func TestWrongSizeFiles(t *testing.T) {
	h := newFakeHub(t)
	files := standardFiles("a")
	h.addCommit(commitA, "main", files)
	dest := t.TempDir()
	if _, err := client(h).Download(context.Background(), Options{Dest: dest}); err != nil {
		t.Fatal(err)
	}
	// A finished file damaged on disk (wrong size): only it is fetched again.
	bad := filepath.Join(dest, "model-00003-of-000004.safetensors")
	os.Truncate(bad, 1000)
	keep := filepath.Join(dest, "model-00002-of-000004.safetensors")
	stKeep, _ := os.Stat(keep)
	gets := map[string]int{}
	for k, v := range h.gets {
		gets[k] = v
	}
	var log eventLog
	res, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	for k, v := range h.gets {
		want := gets[k]
		if k == "model-00003-of-000004.safetensors" {
			want++
		}
		if v != want {
			t.Fatalf("%s: %d GETs, want %d", k, v, want)
		}
	}
	if st, _ := os.Stat(keep); !os.SameFile(st, stKeep) || st.ModTime() != stKeep.ModTime() {
		t.Fatal("a verified file was replaced")
	}
	if res.Fetched != int64(len(files["model-00003-of-000004.safetensors"])) || !strings.Contains(log.text(), "on disk with 1000 bytes") {
		t.Fatalf("fetched %d", res.Fetched)
	}
	// Same size, wrong content, not in the manifest: hashed, found wrong, re-fetched.
	m, _ := verify.ReadManifest(dest)
	m.Remove("model-00001-of-000004.safetensors")
	m.Write(dest)
	p := filepath.Join(dest, "model-00001-of-000004.safetensors")
	b, _ := os.ReadFile(p)
	b[12345] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, err := client(h).Download(context.Background(), Options{Dest: dest}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))

	// A server that sends a short file: a clear error, never a short file.
	h2 := newFakeHub(t)
	h2.addCommit(commitA, "main", files)
	h2.short["model-00002-of-000004.safetensors"] = 100
	d2 := t.TempDir()
	_, err = client(h2).Download(context.Background(), Options{Dest: d2})
	if err == nil || !strings.Contains(err.Error(), "model-00002-of-000004.safetensors") {
		t.Fatalf("short server: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d2, "model-00002-of-000004.safetensors")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("short file got its final name")
	}
	t.Logf("short server error: %v", err)
}

func TestCorruptContentRefetchedOnceThenFatal(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	h.corrupt["model-00002-of-000004.safetensors"] = 1
	h.corrupt["config.json"] = 1 // non-LFS: caught by the git blob id
	dest := t.TempDir()
	var log eventLog
	if _, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if !strings.Contains(log.text(), "complete but wrong (sha256") || !strings.Contains(log.text(), "complete but wrong (git blob id") {
		t.Fatal("mismatch not reported")
	}
	h.corrupt["model-00001-of-000004.safetensors"] = 2
	d2 := t.TempDir()
	_, err := client(h).Download(context.Background(), Options{Dest: d2, Files: []string{"model-00001-of-000004.safetensors"}})
	if err == nil || !strings.Contains(err.Error(), "downloaded twice") {
		t.Fatalf("persistent corruption: %v", err)
	}
	if ents, _ := os.ReadDir(d2); len(ents) != 1 || ents[0].Name() != verify.ManifestFile {
		t.Fatalf("leftovers after a failed file: %v", ents)
	}
}

func TestTokenAnd401(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	h.token = secret
	dest := t.TempDir()
	// No token.
	_, err := client(h).Download(context.Background(), Options{Dest: dest})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	// Wrong token: says it was rejected, does not print it.
	c := client(h)
	c.Token = NewToken("hf_wrongWRONGwrong", "HF_TOKEN")
	_, err = c.Download(context.Background(), Options{Dest: dest})
	if err == nil || !strings.Contains(err.Error(), "rejected") || strings.Contains(err.Error(), "hf_wrong") {
		t.Fatalf("wrong token: %v", err)
	}
	// Right token, from a token file (HF_TOKEN_PATH); drops and 500s on the way.
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte(secret+"\n"), 0o600)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", tokFile)
	c = client(h)
	c.Token = LoadToken()
	if !c.Token.Set() || c.Token.Source != tokFile {
		t.Fatalf("token not loaded: %v", c.Token)
	}
	h.drop["model-00001-of-000004.safetensors"] = 5000
	h.fail500["config.json"] = 1
	var log eventLog
	res, err := c.Download(context.Background(), Options{Dest: dest, Progress: log.fn})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if len(h.cdnAuth) != 0 {
		t.Fatalf("token sent to the CDN: %v", h.cdnAuth)
	}
	// The token appears nowhere: events, results, errors, files.
	all := log.text() + fmt.Sprintf("%+v %#v %v %#v", res, res, c.Token, c)
	if strings.Contains(all, secret) {
		t.Fatal("token leaked into events or results")
	}
	filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), secret) {
			t.Fatalf("token written into %s", p)
		}
		return nil
	})
}

func TestPinnedRevisionAndLayers(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	dest := t.TempDir()
	// --layers 1: the index first, then shard 1 (layer 0) and shard 4
	// (embeddings, lm_head), plus every non-shard file.
	res, err := client(h).Download(context.Background(), Options{Dest: dest, Layers: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, f := range res.Files {
		got = append(got, f.Name)
	}
	sort.Strings(got)
	want := "config.json model-00001-of-000004.safetensors model-00004-of-000004.safetensors model.safetensors.index.json tiktoken.model tokenizer_config.json"
	if strings.Join(got, " ") != want {
		t.Fatalf("--layers 1 fetched %v", got)
	}
	if h.gets["model-00002-of-000004.safetensors"] != 0 {
		t.Fatal("an unneeded shard was fetched")
	}
	rep, err := verify.Check(context.Background(), dest, verify.Options{Layers: 1, SHA256: true, Shards: []verify.FileSpec{
		{Name: "model-00001-of-000004.safetensors", Size: 1_300_007}, {Name: "model-00002-of-000004.safetensors", Size: 2_100_000},
		{Name: "model-00003-of-000004.safetensors", Size: 900_123}, {Name: "model-00004-of-000004.safetensors", Size: 1_048_576}}})
	if err != nil || !rep.Complete {
		t.Fatalf("verify --layers 1: %v %+v", err, rep)
	}

	// main moves to commit B: the directory stays pinned to A.
	h.addCommit(commitB, "main", standardFiles("b"))
	h.apiCalls = nil
	var log eventLog
	if _, err := client(h).Download(context.Background(), Options{Dest: dest, Layers: 3, Progress: log.fn}); err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if len(h.apiCalls) != 1 || h.apiCalls[0] != commitA || !strings.Contains(log.text(), "pinned") {
		t.Fatalf("not pinned: api calls %v", h.apiCalls)
	}
	// Asking for commit B explicitly in the same directory is refused.
	_, err = client(h).Download(context.Background(), Options{Dest: dest, Revision: commitB})
	if err == nil || !strings.Contains(err.Error(), commitA) {
		t.Fatalf("mixing commits: %v", err)
	}
	// An unknown revision.
	_, err = client(h).Download(context.Background(), Options{Dest: t.TempDir(), Revision: "no-such-branch"})
	if err == nil || !strings.Contains(err.Error(), "RevisionNotFound") || !strings.Contains(err.Error(), "--revision") {
		t.Fatalf("unknown revision: %v", err)
	}
	// Too many layers.
	_, err = client(h).Download(context.Background(), Options{Dest: t.TempDir(), Layers: 9})
	if err == nil || !strings.Contains(err.Error(), "3 layers") {
		t.Fatalf("--layers 9: %v", err)
	}
}

func TestNotEnoughSpace(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	orig := diskFree
	defer func() { diskFree = orig }()
	diskFree = func(string) (int64, int64, error) { return 1_000_000, 2_000_000, nil }
	dest := t.TempDir()
	_, err := client(h).Download(context.Background(), Options{Dest: dest})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not enough space")
	assert.Contains(t, err.Error(), "1.00 MB free")
	assert.Zero(t, h.gets["model-00001-of-000004.safetensors"], "downloaded despite the space check")
}

func TestCancelThenResume(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	dest := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	c := client(h)
	_, err := c.Download(ctx, Options{Dest: dest, Jobs: 1, Progress: func(e Event) {
		if e.Snap.Fetched > 1_500_000 {
			once.Do(cancel)
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	res, err := client(h).Download(context.Background(), Options{Dest: dest})
	if err != nil {
		t.Fatal(err)
	}
	checkSet(t, h, dest, commitA, allNames(h, commitA))
	if res.Fetched >= res.Total {
		t.Fatalf("resume fetched %d of %d: nothing was kept", res.Fetched, res.Total)
	}
}

func TestParseContentRange(t *testing.T) {
	for s, want := range map[string][3]int64{
		"bytes 0-9/10":    {0, 10, 1},
		"bytes 5-9/*":     {5, -1, 1},
		"bytes */10":      {-1, 10, 1},
		"bytes 9-5/10":    {0, -1, 0},
		"items 0-1/2":     {0, -1, 0},
		"bytes 1-2":       {0, -1, 0},
		"bytes x-2/3":     {0, -1, 0},
		"bytes 100-199/x": {0, -1, 0},
	} {
		st, tot, ok := parseContentRange(s)
		if st != want[0] || tot != want[1] || ok != (want[2] == 1) {
			t.Errorf("parseContentRange(%q) = %d %d %v", s, st, tot, ok)
		}
	}
}

func TestTrackerRatesAndETA(t *testing.T) {
	now := time.Unix(1000, 0)
	tr := newTracker(func() time.Time { return now })
	tr.add("a", 1000)
	tr.add("b", 3000)
	tr.have("a", 200) // resumed
	tr.set("a", func(p *FileProgress) { p.State = StateDownloading })
	tr.set("b", func(p *FileProgress) { p.State = StateDownloading })
	for i := 0; i < 4; i++ {
		now = now.Add(time.Second)
		tr.got("a", 100)
		tr.got("b", 300)
	}
	s := tr.snapshot()
	if s.Done != 200+400+1200 || s.Total != 4000 || s.Fetched != 1600 {
		t.Fatalf("totals %+v", s)
	}
	// Rates from the window: a 100 B/s, b 300 B/s, overall 400 B/s (first
	// sample at t+1 s, last at t+4 s: 3 s, 1200 bytes).
	a, b := s.Files[0], s.Files[1]
	if a.Rate != 100 || b.Rate != 300 || s.Rate != 400 {
		t.Fatalf("rates a=%v b=%v all=%v", a.Rate, b.Rate, s.Rate)
	}
	if a.ETA != 4*time.Second || b.ETA != 6*time.Second || s.ETA != 5500*time.Millisecond {
		t.Fatalf("eta a=%v b=%v all=%v", a.ETA, b.ETA, s.ETA)
	}
	now = now.Add(time.Minute) // stalled
	if s := tr.snapshot(); s.Rate != 0 || s.ETA != -1 {
		t.Fatalf("stalled %+v", s)
	}
}

func FuzzParseInfo(f *testing.F) {
	f.Add([]byte(`{"sha":"` + commitA + `","siblings":[{"rfilename":"a.safetensors","size":3,"lfs":{"sha256":"` + strings.Repeat("a", 64) + `","size":3}}]}`))
	f.Add([]byte(`{"sha":"` + commitA + `","siblings":[{"rfilename":"sub/config.json","size":3,"blobId":"` + commitB + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseInfo(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if !verify.IsCommit(info.Commit) {
			t.Fatal("bad commit accepted")
		}
		for _, fl := range info.Files {
			if fl.Size < 0 || strings.HasPrefix(fl.Name, "/") {
				t.Fatalf("bad file accepted: %+v", fl)
			}
			for _, c := range strings.Split(fl.Name, "/") {
				if c == ".." || c == "." || c == "" {
					t.Fatalf("unsafe path accepted: %q", fl.Name)
				}
			}
		}
	})
}

// Audit D4 (row 6.19): a file the hub published no hash for is reported
// and recorded as size-checked only, and k3 verify --sha256 does not call
// the set complete, even when its content is wrong.
func TestNoPublishedHashIsNotVerified(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	name := "model-00002-of-000004.safetensors"
	h.nohash[name] = true
	h.corrupt[name] = 100 // wrong content, right size, every time
	dest := t.TempDir()
	var log eventLog
	res, err := client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn})
	require.NoError(t, err, "nothing to compare the content with")
	var fr FileResult
	for _, f := range res.Files {
		if f.Name == name {
			fr = f
		}
		assert.Equal(t, f.Name == name, f.SizeOnly, f.Name)
	}
	assert.True(t, fr.SizeOnly)
	assert.True(t, strings.Contains(log.text(), "file-done "+name+" 0 <nil> size checked, no published hash"), "the file is reported as size-checked")
	man, err := verify.ReadManifest(dest)
	require.NoError(t, err)
	e, ok := man.Lookup(name)
	require.True(t, ok)
	assert.Equal(t, verify.CheckedSize, e.Checked)
	other, _ := man.Lookup("model-00001-of-000004.safetensors")
	assert.Equal(t, verify.CheckedSHA256, other.Checked)
	cfg, _ := man.Lookup("config.json")
	assert.Equal(t, verify.CheckedGitBlob, cfg.Checked)

	var shards []verify.FileSpec
	for n, b := range h.commits[commitA] {
		if strings.HasSuffix(n, ".safetensors") {
			shards = append(shards, verify.FileSpec{Name: n, Size: int64(len(b))})
		}
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].Name < shards[j].Name })
	rep, err := verify.Check(context.Background(), dest, verify.Options{SHA256: true, Shards: shards})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, 1, rep.NoHash)
	for _, f := range rep.Files {
		if f.Name == name {
			assert.Equal(t, verify.StatusNoHash, f.Status)
			assert.Contains(t, f.Detail, "size checked, no published hash")
		}
	}

	// a re-run keeps saying so
	log = eventLog{}
	_, err = client(h).Download(context.Background(), Options{Dest: dest, Progress: log.fn})
	require.NoError(t, err)
	assert.True(t, strings.Contains(log.text(), "already present, size checked, no published hash"), "a re-run says so too")
}

// Audit D20 and issue 18 item 13 (rows 6.29, 6.34): failures that repeating
// cannot fix fail at once instead of after minutes of backoff; transient
// ones are still retried.
func TestOnlyWhatCanSucceedIsRetried(t *testing.T) {
	h := newFakeHub(t)
	h.addCommit(commitA, "main", standardFiles("a"))
	attempts := func(c *Client) (int, error) {
		var log eventLog
		_, err := c.Download(context.Background(), Options{Dest: t.TempDir(), Progress: log.fn, Files: []string{"config.json"}})
		return log.retries, err
	}

	// a token net/http will never send (not the value: it is secret)
	c := client(h)
	c.Token = Token{value: "hf_abc\ndef", Source: "HF_TOKEN"}
	_, err := attempts(c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid header field value")
	assert.NotContains(t, err.Error(), "giving up after", "retried a request that can never be sent")
	assert.NotContains(t, err.Error(), "hf_abc")

	// nothing listens at the endpoint
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	c = NewClient("http://"+addr, h.repo)
	c.Token, c.Retries, c.Backoff = Token{}, 4, func(int) time.Duration { return time.Millisecond }
	_, err = attempts(c)
	require.Error(t, err)
	assert.ErrorIs(t, err, errConnRefused)
	assert.NotContains(t, err.Error(), "giving up after")

	// the destination cannot be written: local, not retried
	ro := t.TempDir()
	require.NoError(t, os.Chmod(ro, 0o500))
	defer os.Chmod(ro, 0o700)
	if f, err := os.Create(filepath.Join(ro, "probe")); err == nil {
		f.Close()
		t.Log("running as root: the read-only case does not apply")
	} else {
		var log eventLog
		_, err = client(h).Download(context.Background(), Options{Dest: ro, Progress: log.fn})
		require.Error(t, err)
		assert.Zero(t, log.retries)
		assert.NotContains(t, err.Error(), "giving up after")
	}

	// a transient server error still is
	h.fail500["config.json"] = 2
	n, err := attempts(client(h))
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	for _, e := range []error{io.ErrUnexpectedEOF, syscall.ECONNRESET, &net.DNSError{IsTemporary: true}, &net.OpError{Op: "read", Err: errors.New("x")}} {
		assert.True(t, retryable(e), "%v", e)
	}
	for _, e := range []error{syscall.ENOSPC, &fs.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, &net.DNSError{IsNotFound: true}, errors.New("x509: certificate signed by unknown authority")} {
		assert.False(t, retryable(e), "%v", e)
	}
}
