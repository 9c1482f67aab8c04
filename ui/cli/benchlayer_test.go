package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/engine/synth"
)

// TestBenchLayerJSON runs `k3 bench layer --json` on a small checkpoint:
// every preset has a projection row whose measured fields are there and
// agree (efficiency = max(read, compute) / measured), the runs behind the
// median are listed, and the compressed projection is consistent with the
// compression and kernel lines. No timing is asserted beyond being
// positive.
func TestBenchLayerJSON(t *testing.T) {
	if raceEnabled {
		t.Skip("a benchmark's numbers, checked in the plain run (see raceEnabled)")
	}
	defer func(f func() synth.Spec) { benchLayerSpec = f }(benchLayerSpec)
	benchLayerSpec = func() synth.Spec {
		s := synth.Small()
		s.Layers, s.FullAttn = 3, []int{3}
		return s
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "layer", "--json", "--dir", t.TempDir(), "--threads", "1", "--tokens", "1", "--overlap-tokens", "2", "--rounds", "3"}, &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	var rows []map[string]any
	kinds := map[string]int{}
	var kernel map[string]any
	var comp []map[string]any
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		kinds[l["kind"].(string)]++
		switch l["kind"] {
		case "projection":
			rows = append(rows, l)
		case "kernel":
			kernel = l
		case "compression":
			comp = append(comp, l)
		}
	}
	assert.Equal(t, map[string]int{"bandwidth": 2, "resident": 3, "streamed": 3, "prefill": 1, "kernel": 1, "compression": 3, "projection": len(plan.Presets)}, kinds)

	require.NotNil(t, kernel)
	assert.Positive(t, kernel["gbps"])
	assert.Positive(t, kernel["bf16c_gbps"])
	slow := kernel["slowdown"].(float64)
	assert.Positive(t, slow)
	for _, c := range comp {
		assert.Greater(t, c["ratio"], 1.1, "%v", c)
		assert.InDelta(t, c["bytes"].(float64)/c["compressed_bytes"].(float64), c["ratio"], 1e-9)
		assert.Greater(t, c["synthetic_ratio"], 1.2)
	}

	require.Len(t, rows, len(plan.Presets))
	num := func(l map[string]any, k string) float64 {
		v, ok := l[k]
		require.True(t, ok, "%s has no %s", l["preset"], k)
		return v.(float64)
	}
	cases := map[string]bool{}
	for i, l := range rows {
		p := plan.Presets[i]
		assert.Equal(t, p.Name, l["preset"])
		measured, read, compute, eff := num(l, "measured_seconds"), num(l, "read_seconds"), num(l, "compute_seconds"), num(l, "overlap_efficiency")
		assert.Positive(t, measured)
		assert.Positive(t, read, "experts are read in every case")
		assert.Greater(t, eff, 0.0)
		assert.LessOrEqual(t, eff, 1.2)
		assert.InDelta(t, math.Max(read, compute)/measured, eff, 1e-9, p.Name)
		runs := l["efficiency_runs"].([]any)
		require.Len(t, runs, 3)
		assert.Contains(t, runs, eff, "the reported run is one of the rounds")
		cases[l["case"].(string)] = true

		// the full model: the limit over the efficiency, compressed bytes
		// fewer by the trunk ratio, compute slower by the kernel's slowdown
		lim := num(l, "limit_seconds")
		assert.InDelta(t, math.Max(num(l, "full_compute_seconds"), num(l, "full_io_seconds")), lim, 1e-9)
		assert.InDelta(t, num(l, "full_compute_seconds")+num(l, "full_io_seconds"), num(l, "seconds"), 1e-9)
		assert.InDelta(t, lim/eff, num(l, "projected_seconds"), 1e-9*lim/eff)
		st, ct := num(l, "streamed_trunk_bytes"), num(l, "compressed_trunk_bytes")
		assert.InDelta(t, math.Max(num(l, "compressed_compute_seconds"), num(l, "compressed_full_io_seconds")), num(l, "compressed_limit_seconds"), 1e-9)
		assert.InDelta(t, num(l, "compressed_limit_seconds")/eff, num(l, "compressed_projected_seconds"), 1e-6)
		if l["ring_slots"].(float64) == 0 {
			// the whole trunk pinned: resident decode, nothing compressed
			assert.Equal(t, "trunk resident", l["case"])
			assert.Zero(t, st)
			assert.Zero(t, num(l, "bench_streamed_layers"))
			assert.Equal(t, num(l, "full_compute_seconds"), num(l, "compressed_compute_seconds"))
			continue
		}
		assert.Positive(t, st)
		be := num(l, "bf16c_break_even_gbps")
		assert.Positive(t, be)
		// at exactly the break-even speed the compressed compute reaches the bf16 limit (or stays under it)
		cc := num(l, "full_compute_seconds") + st*(1/be-1/kernel["gbps"].(float64))/1e9
		assert.InDelta(t, lim, cc, 1e-6*lim)
		assert.Greater(t, st/ct, 1.1, "%s: streamed trunk bytes fewer with BF16C (rows of 64-128 weights here)", p.Name)
		assert.Less(t, num(l, "compressed_full_io_seconds"), num(l, "full_io_seconds"))
		assert.True(t, strings.HasPrefix(l["case"].(string), "ring "), l["case"])
		// the benchmark's ring holds two layers at each of its three
		assert.Equal(t, 2.0, num(l, "bench_ring_slots"))
		assert.Equal(t, 3.0, num(l, "bench_streamed_layers"))
		assert.Equal(t, 3.0, num(l, "bench_in_flight"))
		assert.Equal(t, 2.0, num(l, "ring_slots"))
		assert.LessOrEqual(t, num(l, "in_flight"), num(l, "streamed_layers"))
		if p.Name == "laptop" {
			assert.Equal(t, 93.0, num(l, "streamed_layers"))
			assert.Equal(t, 91.0, num(l, "in_flight"), "the 8 GB floor reads ahead at 91 of 93 layers")
		}
	}
	// ultra (tables streamed), the ring presets, the resident ones
	assert.Len(t, cases, 3)
}
