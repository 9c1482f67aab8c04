package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k3/engine/synth"
)

// TestLayerBenchSmall runs the layer benchmark's code on a small checkpoint:
// every layer gets a time and a byte count, streamed reads really happen.
func TestLayerBenchSmall(t *testing.T) {
	layerBenchRAMBytes, layerBenchRAMTime = 64<<20, 100*time.Millisecond
	dir := t.TempDir()
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	model, tr, err := PrepareLayerBench(context.Background(), dir, spec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(model) != filepath.Join(dir, "layer") {
		t.Fatal(model)
	}
	r, err := RunLayerBench(context.Background(), model, tr, 1, 2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Resident) != 3 || len(r.Streamed) != 3 || r.RAMGBps <= 0 || r.DiskGBps <= 0 || r.PrefillTokensPerS <= 0 {
		t.Fatalf("%+v", r)
	}
	kinds := []string{"kda+dense", "kda+moe", "mla+moe"}
	for i, l := range r.Resident {
		if l.Kind != kinds[i] || l.Bytes <= 0 || l.Seconds <= 0 || l.LimitSeconds <= 0 {
			t.Fatalf("layer %d: %+v", i, l)
		}
		if i > 0 && l.Bytes <= r.Streamed[i].Bytes-1 && l.Bytes != r.Streamed[i].Bytes {
			t.Fatalf("resident and streamed byte counts differ: %+v %+v", l, r.Streamed[i])
		}
	}
}
