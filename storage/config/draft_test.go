package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDraftAllMissingListed: an empty draft config is refused with every
// required field named in one error.
func TestDraftAllMissingListed(t *testing.T) {
	_, err := ParseDraft("draft/config.json", []byte(`{}`))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, []string{"model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
		"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "vocab_size", "rms_norm_eps",
		"target_hidden_size", "num_target_layers", "target_layer_ids", "mask_token_id", "markov_rank", "rope_parameters"}, e.Missing)
	assert.Contains(t, err.Error(), "missing 18 required field(s)")
}

// TestDraftConfigReleased: the released drafter's config (docs/DSPARK.md
// §1.1, as the tiny drafters write it) is read with its YaRN parameters;
// values the engine does not implement are refused.
func TestDraftConfigReleased(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "models", "tiny-release", "draft", "config.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	d, err := ParseDraft(path, raw)
	require.NoError(t, err)
	assert.Equal(t, []int{1, 5, 7}, d.TargetLayers)
	assert.Equal(t, "yarn", d.RopeType)
	assert.Equal(t, 32.0, d.RopeFactor)
	assert.Equal(t, 32768.0, d.RopeOrigMax)
	assert.Equal(t, 508, d.MaskToken)
	assert.Equal(t, 8, d.TargetNumLayers)

	for _, c := range []struct{ json, want string }{
		{`"hidden_act": "gelu"`, `hidden_act = "gelu" is not supported`},
		{`"mla_use_nope": true`, `mla_use_nope = true is not supported`},
		{`"draft_vocab_size": 32000`, "draft_vocab_size = 32000 differs from vocab_size = 512"},
		{`"num_target_layers": 4`, "num_target_layers = 4 but target_layer_ids lists 3 layers"},
		{`"target_layer_ids": [5, 1, 7]`, "target_layer_ids must be strictly increasing"},
		{`"model_type": "deepseek_v3"`, "is not a DSpark draft model"},
		{`"rope_parameters": {"rope_type": "longrope", "rope_theta": 50000}`, "rope_type = \"longrope\" is not supported"},
		{`"rope_parameters": {"rope_type": "yarn", "rope_theta": 50000}`, "rope_parameters.factor"},
	} {
		edited := editJSON(t, raw, c.json)
		_, err := ParseDraft(path, edited)
		require.Error(t, err, c.json)
		assert.Contains(t, err.Error(), c.want, c.json)
	}
}

// editJSON replaces (or adds) one top-level field of a JSON object.
func editJSON(t *testing.T, raw []byte, field string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	var f map[string]any
	require.NoError(t, json.Unmarshal([]byte("{"+field+"}"), &f))
	for k, v := range f {
		m[k] = v
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}
