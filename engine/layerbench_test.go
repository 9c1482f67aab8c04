package engine

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
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
	if r.StreamRingSlots != 1 {
		t.Fatalf("streamed through %d ring slots", r.StreamRingSlots)
	}
	// the limits are the best of the measurements before and after
	nc := len(diskReadConfigs)
	if len(r.RAMRuns) != 2 || len(r.DiskRuns) != 2*nc {
		t.Fatalf("RAM runs %v, disk runs %+v", r.RAMRuns, r.DiskRuns)
	}
	if r.RAMGBps != max(r.RAMRuns[0], r.RAMRuns[1]) {
		t.Fatalf("RAM limit %v, runs %v", r.RAMGBps, r.RAMRuns)
	}
	best := 0.0
	for i, d := range r.DiskRuns {
		c := diskReadConfigs[i%nc]
		if d.When != []string{"before", "after"}[i/nc] || d.QD != c.qd || d.RequestMiB<<20 != c.req || d.Bytes <= 0 || d.GBps <= 0 {
			t.Fatalf("disk run %d: %+v", i, d)
		}
		best = max(best, d.GBps)
	}
	if r.DiskGBps != best {
		t.Fatalf("disk limit %v, runs %+v", r.DiskGBps, r.DiskRuns)
	}
	for _, l := range r.Streamed {
		if want := float64(l.Bytes) / (best * 1e9); l.LimitSeconds != want {
			t.Fatalf("%s: limit %v s, want %v", l.Kind, l.LimitSeconds, want)
		}
	}
	kinds := []string{"kda+dense", "kda+moe", "mla+moe"}
	for i, l := range r.Resident {
		// Go's monotonic clock on Windows advances once per clock interrupt
		// (0.5 to 15.6 ms): a layer this small may measure no time there
		if l.Kind != kinds[i] || l.Bytes <= 0 || l.Seconds < 0 || l.Seconds == 0 && runtime.GOOS != "windows" || l.LimitSeconds <= 0 {
			t.Fatalf("layer %d: %+v", i, l)
		}
		if i > 0 && l.Bytes <= r.Streamed[i].Bytes-1 && l.Bytes != r.Streamed[i].Bytes {
			t.Fatalf("resident and streamed byte counts differ: %+v %+v", l, r.Streamed[i])
		}
	}
}

// TestRawRead reads whole aligned files, stops at the limit after the request
// that reaches it, and gives the same byte count at every queue depth.
func TestRawRead(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, make([]byte, 5<<20+4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, make([]byte, 3<<20+100), 0o644); err != nil {
		t.Fatal(err)
	}
	for qd := 1; qd <= 3; qd++ {
		n, sec, err := rawRead([]string{a, b}, 1<<40, qd, 1<<20)
		if err != nil || n != 8<<20+4096 || sec <= 0 {
			t.Fatalf("qd %d: %d bytes in %v s, %v", qd, n, sec, err)
		}
		if n, _, err := rawRead([]string{a, b}, 2<<20+1, qd, 1<<20); err != nil || n != 3<<20 {
			t.Fatalf("qd %d with a limit: %d bytes, %v", qd, n, err)
		}
	}
	if _, _, err := rawRead([]string{a, filepath.Join(dir, "missing")}, 1<<40, 2, 1<<20); err == nil {
		t.Fatal("a missing file read without error")
	}
	// one request larger than a file reads all of it
	if n, _, err := rawRead([]string{a, b}, 1<<40, 1, 64<<20); err != nil || n != 8<<20+4096 {
		t.Fatalf("64 MiB requests: %d bytes, %v", n, err)
	}
	runs, err := diskReadLimit([]string{a, b}, 1<<40, "before")
	if err != nil || len(runs) != 3 || runs[0].QD != 1 || runs[1].QD != 2 || runs[2].RequestMiB != 256 || runs[1].Bytes != 8<<20+4096 {
		t.Fatalf("%+v %v", runs, err)
	}
	if got := runs[1].String(); got != "64 MiB requests at queue depth 2, before" {
		t.Fatalf("%q", got)
	}
}
