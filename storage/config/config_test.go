package config

import (
	"encoding/json"
	"errors"
	"k3/internal/fixture"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReleasedConfig(t *testing.T) {
	c, err := Load(fixture.Path("kimi-k3/released-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Nested || c.Hidden != 7168 || c.Layers != 93 || c.VocabSize != 163840 || c.KDAHeads != 96 ||
		c.KDAHeadDim != 128 || c.Experts != 896 || c.TopK != 16 || c.Latent != 3584 || c.MoEInter != 3072 ||
		c.SharedExperts != 2 || c.QLoraRank != 1536 || c.KVLoraRank != 512 || c.QKNope != 128 || c.QKRope != 64 ||
		c.VHead != 128 || c.Intermediate != 33792 || c.AttnResBlock != 12 || c.FirstKDense != 1 ||
		c.SituBeta != 4 || c.SituLinearBeta != 25 || c.RoutedScale != 1 || c.GateLowerBound != -5 || !c.ExpertsMXFP4 ||
		c.EOS != 163586 || c.BOS != 163584 || c.ConvK != 4 || !c.OutputGate {
		t.Fatalf("released config read wrong: %+v", c)
	}
	var mla []int
	for i := 0; i < c.Layers; i++ {
		if c.IsMLA(i) {
			mla = append(mla, i)
		}
	}
	if len(mla) != 24 || mla[0] != 3 || mla[22] != 91 || mla[23] != 92 {
		t.Fatalf("0-based MLA layers %v", mla)
	}
	if c.IsMLA(0) || !c.IsDense(0) || c.IsDense(1) {
		t.Fatal("layer 0 must be KDA + dense")
	}
}

// TestFlatShape: the same text config at top level is accepted and equal.
func TestFlatShape(t *testing.T) {
	raw, _ := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	var top map[string]json.RawMessage
	json.Unmarshal(raw, &top)
	flat := top["text_config"]
	c, err := Parse("flat.json", flat)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := Parse("nested.json", raw)
	if c.Nested || c.Hidden != n.Hidden || c.TopK != n.TopK || len(c.MLA) != len(n.MLA) {
		t.Fatalf("flat %+v", c)
	}
	for i := range c.MLA {
		if c.MLA[i] != n.MLA[i] {
			t.Fatalf("layer %d differs", i)
		}
	}
}

func refuse(t *testing.T, name string, raw []byte, want ...string) *Error {
	t.Helper()
	_, err := Parse(name, raw)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: want a refusal, got %v", name, err)
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message lacks %q:\n%s", name, w, msg)
		}
	}
	return ce
}

func TestSeedRefusals(t *testing.T) {
	for file, want := range map[string][]string{
		"bad_layer_index.json": {"full_attn_layers[2] = 999 is outside 1..13 (the list is ONE-based)"},
		"bad_topk.json":        {"num_experts_per_token = 128 exceeds num_experts = 8"},
		"no_layermap.json":     {"missing", "full_attn_layers"},
	} {
		raw, err := os.ReadFile(fixture.Path("seed-v1", "cfg", file))
		if err != nil {
			t.Fatal(err)
		}
		refuse(t, file, raw, want...)
	}
}

func TestAllMissingListed(t *testing.T) {
	raw, _ := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	var top map[string]any
	json.Unmarshal(raw, &top)
	tc := top["text_config"].(map[string]any)
	delete(tc, "hidden_size")
	delete(tc, "routed_scaling_factor")
	delete(tc["linear_attn_config"].(map[string]any), "head_dim")
	tc["num_experts"] = "896"
	tc["moe_renormalize"] = 1
	tc["hidden_act"] = "silu"
	b, _ := json.Marshal(top)
	e := refuse(t, "edited.json", b, "hidden_size", "routed_scaling_factor", "head_dim",
		"num_experts is a string, want a number", "moe_renormalize is a number, want true or false",
		`hidden_act = "silu" is not supported`)
	if len(e.Missing) != 3 {
		t.Fatalf("missing %v", e.Missing)
	}
}

func TestStructuralRefusals(t *testing.T) {
	raw, _ := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	edit := func(f func(tc, lc map[string]any)) []byte {
		var top map[string]any
		json.Unmarshal(raw, &top)
		tc := top["text_config"].(map[string]any)
		f(tc, tc["linear_attn_config"].(map[string]any))
		b, _ := json.Marshal(top)
		return b
	}
	refuse(t, "zero-based", edit(func(tc, lc map[string]any) {
		lc["kda_layers"] = append([]any{0.0}, lc["kda_layers"].([]any)[1:]...)
	}), "kda_layers[0] = 0 is outside 1..93", "layers [1] are in neither")
	refuse(t, "both", edit(func(tc, lc map[string]any) {
		lc["kda_layers"] = append(lc["kda_layers"].([]any), 4.0)
	}), "layer 4 is listed in both")
	refuse(t, "neg", edit(func(tc, lc map[string]any) { tc["kv_lora_rank"] = -1 }), "kv_lora_rank = -1 must be positive")
	refuse(t, "frac", edit(func(tc, lc map[string]any) { tc["hidden_size"] = 7168.5 }), "hidden_size is 7168.5, want an integer")
	refuse(t, "quant", edit(func(tc, lc map[string]any) {
		tc["quantization_config"].(map[string]any)["format"] = "int4"
	}), `format "int4" is not supported`)
	refuse(t, "gate", edit(func(tc, lc map[string]any) { lc["use_full_rank_gate"] = false }), "use_full_rank_gate = false is not supported")
	refuse(t, "notjson", []byte("[1,2]"), "not a JSON object")
}

func FuzzParse(f *testing.F) {
	for _, p := range []string{fixture.Path("kimi-k3/released-config.json"), fixture.Path("seed-v1/cfg/bad_topk.json")} {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"text_config":{"linear_attn_config":{"full_attn_layers":[1e300]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse("fuzz.json", b)
		if err == nil {
			if len(c.MLA) != c.Layers || c.Hidden <= 0 || c.TopK > c.Experts {
				t.Fatalf("accepted an inconsistent config: %+v", c)
			}
		}
	})
}

// Audit D22 (rows 1.80, 1.81, 1.83, 1.88): values encoding/json or the old
// reader took silently are refused, naming the field.
func TestValueRefusals(t *testing.T) {
	raw, _ := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	edit := func(f func(tc map[string]any)) []byte {
		var top map[string]any
		json.Unmarshal(raw, &top)
		f(top["text_config"].(map[string]any))
		b, _ := json.Marshal(top)
		return b
	}
	refuse(t, "eos string", edit(func(tc map[string]any) { tc["eos_token_id"] = "x" }), "eos_token_id is a string, want a token id")
	refuse(t, "eos past vocab", edit(func(tc map[string]any) { tc["eos_token_id"] = 999999 }), "eos_token_id = 999999 is outside the vocabulary 0..163839")
	refuse(t, "bos negative", edit(func(tc map[string]any) { tc["bos_token_id"] = -3 }), "bos_token_id = -3 is outside the vocabulary")
	refuse(t, "eos list", edit(func(tc map[string]any) { tc["eos_token_id"] = []any{1, "y"} }), "eos_token_id[1] is a string")
	refuse(t, "eps overflow", edit(func(tc map[string]any) { tc["rms_norm_eps"] = 1e300 }), "rms_norm_eps = 1e+300 is outside the float32 range")
	c, err := Parse("list.json", edit(func(tc map[string]any) { tc["eos_token_id"] = []any{163586, 163585} }))
	if err != nil || c.EOS != 163586 {
		t.Fatalf("an eos list: %v %+v", err, c)
	}

	// a duplicate key: the last value would win silently
	dup := strings.Replace(string(raw), `"hidden_size": 7168,`, `"hidden_size": 64, "hidden_size": 7168,`, 1)
	if dup == string(raw) {
		t.Fatal("the fixture's hidden_size line moved")
	}
	refuse(t, "duplicate", []byte(dup), `duplicate key "text_config.hidden_size"`)
	// bytes that are not UTF-8 in any field, checked or not
	bad := strings.Replace(string(raw), `"model_type": "kimi_k3"`, "\"model_type\": \"kimi\xff\"", 1)
	if bad == string(raw) {
		t.Fatal("the fixture's model_type line moved")
	}
	refuse(t, "utf8", []byte(bad), "invalid UTF-8 at byte")
}

func TestLayerKind(t *testing.T) {
	c := &Config{MLA: []bool{false, false, false, true}, FirstKDense: 1}
	assert.Equal(t, []string{"kda+dense", "kda+moe", "kda+moe", "mla+moe"},
		[]string{c.LayerKind(0), c.LayerKind(1), c.LayerKind(2), c.LayerKind(3)})
}
