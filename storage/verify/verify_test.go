package verify

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/safetensors"
)

func TestShardTableMatchesFixture(t *testing.T) {
	f, err := os.Open(fixture.Path("seed-v1/shard_sizes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []FileSpec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		n, _ := strconv.ParseInt(fs[1], 10, 64)
		got = append(got, FileSpec{fs[0], n})
	}
	if len(got) != ShardCount {
		t.Fatalf("fixture has %d shards", len(got))
	}
	var sum int64
	for i, s := range ReleasedShards {
		if got[i] != s {
			t.Fatalf("shard %d: table %v, fixture %v", i, s, got[i])
		}
		if want := fmt.Sprintf("model-%05d-of-000096.safetensors", i+1); s.Name != want {
			t.Fatalf("shard %d named %s", i, s.Name)
		}
		sum += s.Size
	}
	if sum != ReleasedBytes {
		t.Fatalf("sum %d != ReleasedBytes %d", sum, ReleasedBytes)
	}
	if !sort.SliceIsSorted(ReleasedShards[:], func(i, j int) bool { return ReleasedShards[i].Name < ReleasedShards[j].Name }) {
		t.Fatal("table not sorted")
	}
	if sz, ok := ReleasedSize("model-00095-of-000096.safetensors"); !ok || sz != 92_289_328 {
		t.Fatalf("ReleasedSize(95) = %d %v", sz, ok)
	}
	if _, ok := ReleasedSize("config.json"); ok {
		t.Fatal("config.json has a shard size")
	}
}

// sparseRelease makes a directory holding the whole release as sparse files
// (1.56 TB apparent size, no blocks used).
func sparseRelease(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, s := range ReleasedShards {
		f, err := os.Create(filepath.Join(dir, s.Name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(s.Size); err != nil {
			t.Skipf("filesystem cannot hold a %d-byte sparse file: %v", s.Size, err)
		}
		f.Close()
	}
	for _, n := range TokenizerFiles {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func find(r *Report, name string) FileResult {
	for _, f := range r.Files {
		if f.Name == name {
			return f
		}
	}
	return FileResult{Name: name, Status: "absent-from-report"}
}

func TestCheckFullRelease(t *testing.T) {
	dir := sparseRelease(t)
	ctx := context.Background()
	rep, err := Check(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || rep.OK != 99 || rep.Required != 99 || rep.Bytes != ReleasedBytes+6 || rep.WantBytes != ReleasedBytes {
		t.Fatalf("complete set: %+v", *rep)
	}

	s5 := filepath.Join(dir, ReleasedShards[4].Name)
	if err := os.Truncate(s5, ReleasedShards[4].Size-1); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ReleasedShards[9].Name)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ReleasedShards[9].Name+PartSuffix), []byte("x"), 0o644)
	os.Remove(filepath.Join(dir, "tiktoken.model"))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)

	rep, err = Check(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete || rep.Missing != 2 || rep.WrongSize != 1 || rep.Extra != 1 || rep.Partial != 1 || rep.OK != 96 {
		t.Fatalf("damaged set: ok=%d missing=%d wrong=%d extra=%d partial=%d", rep.OK, rep.Missing, rep.WrongSize, rep.Extra, rep.Partial)
	}
	if f := find(rep, ReleasedShards[4].Name); f.Status != StatusWrongSize || f.Size != ReleasedShards[4].Size-1 || !strings.Contains(f.Detail, "(-1)") {
		t.Fatalf("wrong-size shard: %+v", f)
	}
	if f := find(rep, ReleasedShards[9].Name); f.Status != StatusMissing || !strings.Contains(f.Detail, ".part") {
		t.Fatalf("missing shard: %+v", f)
	}
	if f := find(rep, "notes.txt"); f.Status != StatusExtra {
		t.Fatalf("extra: %+v", f)
	}
	if f := find(rep, "tiktoken.model"); f.Status != StatusMissing {
		t.Fatalf("tokenizer: %+v", f)
	}
	if rep.Bytes != ReleasedBytes-ReleasedShards[4].Size-ReleasedShards[9].Size+4 {
		t.Fatalf("bytes %d", rep.Bytes)
	}
	if _, err := Check(ctx, dir, Options{SHA256: true}); err == nil || !strings.Contains(err.Error(), ManifestFile) {
		t.Fatalf("--sha256 without manifest: %v", err)
	}
}

// smallSet builds a tiny "release" with real content for hash checks.
func smallSet(t *testing.T) (string, []FileSpec, *Manifest) {
	dir := t.TempDir()
	m := &Manifest{Repo: "test/repo", Revision: "main", Commit: strings.Repeat("ab", 20)}
	var set []FileSpec
	for i, n := range []string{"model-00001-of-000002.safetensors", "model-00002-of-000002.safetensors", "config.json", "tiktoken.model", "tokenizer_config.json"} {
		data := bytes.Repeat([]byte{byte(i + 1)}, 5000+i*70001)
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m.Set(ManifestEntry{Name: n, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Commit: m.Commit})
		if strings.HasSuffix(n, ".safetensors") {
			set = append(set, FileSpec{n, int64(len(data))})
		}
	}
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir, set, m
}

func TestCheckSHA256(t *testing.T) {
	dir, set, _ := smallSet(t)
	ctx := context.Background()
	// Progress comes from the hashing goroutines: keep the largest count
	// under a lock (the calls may arrive out of order).
	var mu sync.Mutex
	var last int64
	rep, err := Check(ctx, dir, Options{SHA256: true, Shards: set, Progress: func(d, tot int64) {
		mu.Lock()
		last = max(last, d)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || rep.OK != 5 || rep.HashBad != 0 || !rep.Hashed || last != rep.Bytes {
		t.Fatalf("good set: %+v (progress %d)", *rep, last)
	}
	if rep.Commit != strings.Repeat("ab", 20) {
		t.Fatalf("commit %q", rep.Commit)
	}
	// Flip one byte in the middle of shard 2 (same size).
	p := filepath.Join(dir, set[1].Name)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	rep, err = Check(ctx, dir, Options{SHA256: true, Shards: set})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(rep, set[1].Name); rep.Complete || f.Status != StatusHashMismatch || rep.HashBad != 1 {
		t.Fatalf("corrupt shard: complete=%v %+v", rep.Complete, f)
	}
	// Without --sha256 the same directory passes (sizes are right).
	rep, _ = Check(ctx, dir, Options{Shards: set})
	if !rep.Complete {
		t.Fatal("size-only check failed")
	}
	// A file the manifest does not know is "no-hash", not complete.
	m, _ := ReadManifest(dir)
	m.Remove("config.json")
	m.Write(dir)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	rep, _ = Check(ctx, dir, Options{SHA256: true, Shards: set})
	if rep.Complete || rep.NoHash != 1 || find(rep, "config.json").Status != StatusNoHash {
		t.Fatalf("unrecorded file: %+v", *rep)
	}
}

func TestCheckCancel(t *testing.T) {
	dir, set, _ := smallSet(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, dir, Options{SHA256: true, Shards: set}); err == nil {
		t.Fatal("cancelled check succeeded")
	}
}

func TestHashFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 4096, hashChunk - 1, hashChunk, 2*hashChunk + 12345} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7 >> 3)
		}
		p := filepath.Join(dir, fmt.Sprint(n))
		os.WriteFile(p, data, 0o644)
		sum, size, err := HashFile(context.Background(), p, nil)
		want := sha256.Sum256(data)
		if err != nil || size != int64(n) || sum != hex.EncodeToString(want[:]) {
			t.Fatalf("HashFile(%d bytes): %s %d %v", n, sum, size, err)
		}
		if n > 10 {
			h := sha256.New()
			if err := HashPrefix(context.Background(), h, p, int64(n-3), nil); err != nil {
				t.Fatal(err)
			}
			w := sha256.Sum256(data[:n-3])
			if !bytes.Equal(h.Sum(nil), w[:]) {
				t.Fatalf("HashPrefix(%d)", n-3)
			}
		}
	}
}

// testWeightMap imitates the release's layout: 4 layers over 3 shards,
// globals in shard 3, the vision tower in its own shard 4.
func testWeightMap() map[string]string {
	return map[string]string{
		"language_model.model.layers.0.input_layernorm.weight":                     "a-1.safetensors",
		"language_model.model.layers.0.mlp.gate_proj.weight":                       "a-1.safetensors",
		"language_model.model.layers.1.self_attn.o_proj.weight":                    "a-1.safetensors",
		"language_model.model.layers.1.block_sparse_moe.experts.5.w1.weight":       "a-2.safetensors",
		"model.layers.2.input_layernorm.weight":                                    "a-2.safetensors",
		"language_model.model.layers.3.block_sparse_moe.experts.0.w2.weight_scale": "a-5.safetensors",
		"language_model.model.embed_tokens.weight":                                 "a-3.safetensors",
		"language_model.lm_head.weight":                                            "a-3.safetensors",
		"language_model.model.norm.weight":                                         "a-3.safetensors",
		"language_model.model.output_attn_res_proj.weight":                         "a-3.safetensors",
		"vision_tower.encoder.blocks.0.wqkv.weight":                                "a-4.safetensors",
		"mm_projector.proj.0.weight":                                               "a-4.safetensors",
	}
}

func testIndexJSON() []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 123}, "weight_map": testWeightMap()})
	return b
}

func TestShardsForLayers(t *testing.T) {
	ix, err := safetensors.ParseIndex(testIndexJSON())
	require.NoError(t, err)
	assert.Equal(t, 4, NumLayers(ix))
	for _, c := range []struct {
		n    int
		want string
	}{
		{1, "a-1.safetensors a-3.safetensors"},
		{2, "a-1.safetensors a-2.safetensors a-3.safetensors"},
		{3, "a-1.safetensors a-2.safetensors a-3.safetensors"},
		{4, "a-1.safetensors a-2.safetensors a-3.safetensors a-5.safetensors"},
		{0, "a-1.safetensors a-2.safetensors a-3.safetensors a-5.safetensors"},
	} {
		got, err := ShardsForLayers(ix, c.n)
		require.NoError(t, err, "ShardsForLayers(%d)", c.n)
		assert.Equal(t, c.want, strings.Join(got, " "), "ShardsForLayers(%d)", c.n)
	}
	_, err = ShardsForLayers(ix, 5)
	assert.ErrorContains(t, err, "the index has 4 layers; --layers 5 is more than that")
	assert.Equal(t, "a-1.safetensors a-2.safetensors a-3.safetensors a-4.safetensors a-5.safetensors", strings.Join(ix.Files(), " "))
}

func TestCheckLayers(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, safetensors.IndexFile), testIndexJSON(), 0o644))
	set := []FileSpec{{"a-1.safetensors", 10}, {"a-2.safetensors", 20}, {"a-3.safetensors", 30}, {"a-4.safetensors", 40}, {"a-5.safetensors", 50}}
	for _, s := range set[:3] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, s.Name), make([]byte, s.Size), 0o644))
	}
	for _, n := range TokenizerFiles {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("{}"), 0o644))
	}
	ctx := context.Background()
	rep, err := Check(ctx, dir, Options{Layers: 2, Shards: set})
	require.NoError(t, err)
	assert.True(t, rep.Complete, "layers 2: %+v", *rep)
	assert.Equal(t, 7, rep.Required)
	assert.Equal(t, int64(60), rep.WantBytes)

	rep, err = Check(ctx, dir, Options{Layers: 4, Shards: set})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, StatusMissing, find(rep, "a-5.safetensors").Status, "layers 4 should miss a-5")

	rep, err = Check(ctx, dir, Options{Shards: set})
	require.NoError(t, err)
	assert.False(t, rep.Complete)
	assert.Equal(t, 2, rep.Missing, "the full set misses a-4 and a-5")

	require.NoError(t, os.Remove(filepath.Join(dir, safetensors.IndexFile)))
	_, err = Check(ctx, dir, Options{Layers: 2, Shards: set})
	assert.ErrorContains(t, err, "--layers needs "+safetensors.IndexFile)
}

func TestManifestRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{Repo: "r/x", Revision: "main", Commit: strings.Repeat("0a", 20)}
	m.Set(ManifestEntry{Name: "b", Size: 2, SHA256: strings.Repeat("1", 64), Commit: m.Commit, ModTime: 5})
	m.Set(ManifestEntry{Name: "a", Size: 1, SHA256: strings.Repeat("2", 64)})
	m.Set(ManifestEntry{Name: "b", Size: 3, SHA256: strings.Repeat("3", 64)})
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Files) != 2 || got.Files[0].Name != "a" || got.Files[1].Size != 3 || got.Commit != m.Commit {
		t.Fatalf("round trip: %+v", got.Files)
	}
	for _, s := range []string{
		`{"format":2}`,
		`{"format":1,"commit":"xyz"}`,
		`{"format":1,"files":[{"name":"../a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
		`{"format":1,"files":[{"name":"a","size":-1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
		`{"format":1,"files":[{"name":"a","size":1,"sha256":"ABC"}]}`,
		`{"format":1,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"},{"name":"a","size":1,"sha256":"` + strings.Repeat("a", 64) + `"}]}`,
	} {
		if _, err := ParseManifest(strings.NewReader(s)); err == nil {
			t.Errorf("ParseManifest(%q) accepted", s)
		}
	}
}

// FuzzShardsForLayers: whatever index parses, its layer prefixes name only
// plain shard names, each prefix within the whole.
func FuzzShardsForLayers(f *testing.F) {
	f.Add(testIndexJSON())
	f.Add([]byte(`{"metadata":{"total_size":"12"},"weight_map":{"model.layers.1.x":"a.safetensors"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := safetensors.ParseIndex(data)
		if err != nil {
			return
		}
		n := NumLayers(ix)
		all, err := ShardsForLayers(ix, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if !SafeName(s) {
				t.Fatalf("unsafe shard name %q accepted", s)
			}
		}
		if n > 0 {
			one, err := ShardsForLayers(ix, 1)
			if err != nil || len(one) > len(all) {
				t.Fatalf("prefix larger than whole: %v %v", one, err)
			}
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":1,"repo":"a/b","commit":"` + strings.Repeat("ab", 20) + `","files":[{"name":"x","size":3,"sha256":"` + strings.Repeat("c", 64) + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, e := range m.Files {
			if !SafeName(e.Name) || !IsSHA256(e.SHA256) || e.Size < 0 {
				t.Fatalf("invalid entry accepted: %+v", e)
			}
		}
		// What parses must survive a write/read round trip.
		dir := t.TempDir()
		if err := m.Write(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadManifest(dir); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestCheckRefusesDuplicateIndexKey: an index naming a tensor twice is
// refused, with the tensor's name (safetensors.Open refuses it too).
func TestCheckRefusesDuplicateIndexKey(t *testing.T) {
	dir := t.TempDir()
	idx := `{"weight_map":{"model.layers.0.a":"a-1.safetensors","model.layers.0.b":"a-1.safetensors","model.layers.0.a":"a-2.safetensors"}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, safetensors.IndexFile), []byte(idx), 0o644))
	_, err := Check(context.Background(), dir, Options{Layers: 1, Shards: []FileSpec{{"a-1.safetensors", 1}, {"a-2.safetensors", 1}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"model.layers.0.a"`)
	assert.Contains(t, err.Error(), "listed twice")
	assert.Contains(t, err.Error(), filepath.Join(dir, safetensors.IndexFile))
}
