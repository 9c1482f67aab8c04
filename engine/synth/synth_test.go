package synth_test

import (
	"context"
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
		m, set, err := engine.Open(dir, "", 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := engine.NewEngine(m, 2)
		res, err := e.Generate(context.Background(), nil, []int{1, 2, 3, 4, 5}, engine.GenOptions{Gen: 8})
		e.Close()
		m.Store.Close()
		set.Close()
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
