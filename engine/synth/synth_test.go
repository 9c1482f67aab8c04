package synth_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"k3/engine"
	"k3/engine/synth"
)

// TestSmallRuns: a generated checkpoint binds and generates deterministically,
// and the same spec writes the same tokens twice.
func TestSmallRuns(t *testing.T) {
	var first []int
	for run := 0; run < 2; run++ {
		dir := filepath.Join(t.TempDir(), "m")
		if err := synth.Write(dir, synth.Small()); err != nil {
			t.Fatal(err)
		}
		m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}})
		if err != nil {
			t.Fatal(err)
		}
		e := m.NewEngine(2)
		res, err := e.Generate(context.Background(), nil, []int{1, 2, 3, 4, 5}, engine.GenOptions{MaxTokens: 8})
		e.Close()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		distinct := map[int]bool{}
		for _, id := range res.Generated {
			distinct[id] = true
		}
		if len(res.Generated) != 8 || len(distinct) < 2 {
			t.Fatalf("degenerate generation %v", res.Generated)
		}
		if run == 0 {
			first = res.Generated
		} else {
			for i := range first {
				if first[i] != res.Generated[i] {
					t.Fatalf("not deterministic: %v vs %v", first, res.Generated)
				}
			}
		}
	}
}

// TestWriteProgress: progress comes once per shard with the bytes written so
// far (the index's total_size at the end); a cancelled write leaves no index.
func TestWriteProgress(t *testing.T) {
	spec := synth.Small()
	dir := filepath.Join(t.TempDir(), "m")
	var calls []int
	var last int64
	err := synth.WriteProgress(context.Background(), dir, spec, func(shards, of int, bytes int64) {
		if of != spec.Layers+1 || bytes <= last {
			t.Errorf("progress %d of %d, %d bytes after %d", shards, of, bytes, last)
		}
		calls = append(calls, shards)
		last = bytes
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != spec.Layers+1 || calls[len(calls)-1] != spec.Layers+1 {
		t.Fatalf("progress calls %v for %d shards", calls, spec.Layers+1)
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata struct {
			TotalSize int64 `json:"total_size"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &idx); err != nil || idx.Metadata.TotalSize != last {
		t.Fatalf("index total_size %d (err %v), progress ended at %d", idx.Metadata.TotalSize, err, last)
	}

	ctx, cancel := context.WithCancel(context.Background())
	dir2 := filepath.Join(t.TempDir(), "m")
	err = synth.WriteProgress(ctx, dir2, spec, func(shards, of int, bytes int64) {
		if shards == 1 {
			cancel()
		}
	})
	if err != context.Canceled {
		t.Fatalf("cancelled write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir2, "model.safetensors.index.json")); !os.IsNotExist(err) {
		t.Fatalf("a cancelled write left an index (%v)", err)
	}
}
