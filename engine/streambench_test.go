package engine

import (
	"context"
	"testing"

	"k3/engine/synth"
)

// TestStreamBenchSmall runs the stream benchmark on a small checkpoint: four
// raw measurements (queue depth 1 and 2, before and after), then the trunk,
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
	kinds := []string{"raw", "raw", "raw", "raw", "trunk", "experts", "decode"}
	if len(res) != len(kinds) {
		t.Fatalf("%d lines: %+v", len(res), res)
	}
	best := 0.0
	for _, m := range res[:4] {
		best = max(best, m.GBps)
	}
	notes := []string{"queue depth 1, before", "queue depth 2, before", "queue depth 1, after", "queue depth 2, after"}
	for i, m := range res {
		if m.Kind != kinds[i] || m.Bytes <= 0 || m.Seconds <= 0 || m.RawGBps != best || m.Ratio != m.GBps/best {
			t.Fatalf("line %d: %+v (best raw %v)", i, m, best)
		}
		if i < 4 && m.Note != notes[i] {
			t.Fatalf("line %d note %q", i, m.Note)
		}
	}
	// the raw lines read every shard, the trunk line the whole packed trunk
	if res[0].Bytes != res[1].Bytes || res[0].Bytes != res[3].Bytes {
		t.Fatalf("raw byte counts differ: %+v", res[:4])
	}
}
