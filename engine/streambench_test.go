package engine

import (
	"context"
	"testing"

	"k3/engine/synth"
)

// TestStreamBenchSmall runs the stream benchmark on a small checkpoint: the
// raw measurements (each request size and depth, before and after), then the trunk,
// the experts and a decode, every ratio taken against the best raw rate.
func TestStreamBenchSmall(t *testing.T) {
	spec := synth.Small()
	model, tr, err := prepareBench(context.Background(), t.TempDir(), spec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunStreamBench(context.Background(), model, tr, 2, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	nc := len(diskReadConfigs)
	kinds := []string{"trunk", "experts", "decode"}
	for range 2 * nc {
		kinds = append([]string{"raw"}, kinds...)
	}
	if len(res) != len(kinds) {
		t.Fatalf("%d lines: %+v", len(res), res)
	}
	best := 0.0
	for _, m := range res[:2*nc] {
		best = max(best, m.GBps)
	}
	notes := []string{"64 MiB requests at queue depth 1, before", "64 MiB requests at queue depth 2, before", "256 MiB requests at queue depth 1, before",
		"64 MiB requests at queue depth 1, after", "64 MiB requests at queue depth 2, after", "256 MiB requests at queue depth 1, after"}
	for i, m := range res {
		if m.Kind != kinds[i] || m.Bytes <= 0 || m.Seconds <= 0 || m.RawGBps != best || m.Ratio != m.GBps/best {
			t.Fatalf("line %d: %+v (best raw %v)", i, m, best)
		}
		if i < 2*nc && m.Note != notes[i] {
			t.Fatalf("line %d note %q", i, m.Note)
		}
	}
	// the raw lines read every shard, the trunk line the whole packed trunk
	for _, m := range res[1 : 2*nc] {
		if m.Bytes != res[0].Bytes {
			t.Fatalf("raw byte counts differ: %+v", res[:2*nc])
		}
	}
}
