package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor/measure"
	"k3/internal/fixture"
)

// TestBenchCompressJSON: `k3 bench compress --json` on the trained demo
// model and a reference checkpoint reports a ratio line per tensor kind,
// a decode line per format whose numbers agree with each other, and the
// mat-vec comparison.
func TestBenchCompressJSON(t *testing.T) {
	if raceEnabled {
		t.Skip("a benchmark's numbers, checked in the plain run (see raceEnabled)")
	}
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, run([]string{"bench", "compress", "--json", "--rounds", "1", "--threads", "1", fixture.ModelDir("tiny-release")}, &out, &errb), errb.String())
	var ratios, decodes []map[string]any
	var kernel map[string]any
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
		switch l["line"] {
		case "ratio":
			ratios = append(ratios, l)
		case "decode":
			decodes = append(decodes, l)
		case "kernel":
			kernel = l
		default:
			t.Fatalf("unknown line %s", sc.Text())
		}
	}
	kinds := map[string][]string{}
	for _, r := range ratios {
		src, kind := r["source"].(string), r["kind"].(string)
		kinds[src] = append(kinds[src], kind)
		for _, f := range []string{"tensors", "weights", "bf16_bytes", "bf16c_bytes", "ratio", "block_ratio", "exponent_entropy", "entropy_ratio"} {
			assert.Positive(t, r[f], "%s %s %s", src, kind, f)
		}
		assert.InDelta(t, r["bf16_bytes"].(float64)/r["bf16c_bytes"].(float64), r["ratio"], 1e-9)
		assert.InDelta(t, 16/(8+r["exponent_entropy"].(float64)), r["entropy_ratio"], 1e-9)
		raw := r["raw_fraction"]
		if raw == nil {
			raw = 0.0
		}
		assert.GreaterOrEqual(t, raw.(float64), 0.0)
		assert.Less(t, raw.(float64), 0.05, "trained weights: few raw blocks (%s %s)", src, kind)
		fm := r["formats"].([]any)
		require.Len(t, fm, 3)
		for i, name := range []string{measure.FormatBF16C, measure.FormatX3, measure.FormatHuff} {
			f := fm[i].(map[string]any)
			assert.Equal(t, name, f["format"])
			assert.InDelta(t, r["bf16_bytes"].(float64)/f["bytes"].(float64), f["ratio"], 1e-9)
		}
	}
	want := []string{measure.KindAttnQ, measure.KindAttnKV, measure.KindAttnO, measure.KindAttnGate, measure.KindShared,
		measure.KindRouter, measure.KindLatent, measure.KindDense, measure.KindEmbed, measure.KindLMHead, measure.KindOther, "all"}
	assert.Equal(t, want, kinds["demo"])
	assert.Equal(t, want, kinds["tiny-release"])

	require.Len(t, decodes, 4)
	for i, f := range []string{"bf16", measure.FormatBF16C, measure.FormatX3, measure.FormatHuff} {
		d := decodes[i]
		assert.Equal(t, f, d["format"])
		assert.Positive(t, d["gbps"])
		assert.Len(t, d["runs"], 1)
		assert.Equal(t, 1.0, d["decode_threads"])
		assert.InDelta(t, d["gbps"].(float64)/d["format_ratio"].(float64), d["keeps_up_with_disk_gbps"], 1e-9)
	}
	assert.Equal(t, 1.0, decodes[0]["format_ratio"])
	assert.Greater(t, decodes[1]["format_ratio"], 1.2, "bf16c on trained weights")

	require.NotNil(t, kernel)
	assert.Equal(t, 4096.0, kernel["rows"])
	assert.Equal(t, 7168.0, kernel["cols"])
	assert.Positive(t, kernel["bf16_gbps"])
	assert.Positive(t, kernel["bf16c_gbps"])
	assert.Positive(t, kernel["slowdown"])
}

// TestBenchCompressRefuses: an argument that is neither a checkpoint nor a
// TensorFlow.js model is a runtime error naming it.
func TestBenchCompressRefuses(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	assert.Equal(t, ExitRuntime, run([]string{"bench", "compress", dir}, &out, &errb))
	assert.Contains(t, errb.String(), dir+": no safetensors checkpoint and no TensorFlow.js model with float32 weights")
	assert.Equal(t, ExitUsage, run([]string{"bench", "compress", "--rounds", "0"}, &out, &errb))
}
