package layout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLayerOf(t *testing.T) {
	for name, want := range map[string]struct {
		layer int
		rest  string
	}{
		"language_model.model.layers.0.x":              {0, "x"},
		"language_model.model.layers.92.mlp.up.w":      {92, "mlp.up.w"},
		"model.layers.17.self_attn.q":                  {17, "self_attn.q"},
		"model.layers.999999.x":                        {999999, "x"},
		"language_model.model.layers.x.y":              {-1, ""},
		"language_model.model.layers.07.y":             {-1, ""},
		"language_model.model.layers.3":                {-1, ""},
		"model.layers.-3.x":                            {-1, ""},
		"model.layers.1000000.x":                       {-1, ""},
		"language_model.model.norm.weight":             {-1, ""},
		"language_model.lm_head.weight":                {-1, ""},
		"vision_tower.layers.3.x":                      {-1, ""},
		"xmodel.layers.3.x":                            {-1, ""},
		"language_model.language_model.model.layers.1": {-1, ""},
	} {
		l, rest, ok := LayerOf(name)
		if want.layer < 0 {
			assert.False(t, ok, name)
			continue
		}
		if assert.True(t, ok, name) {
			assert.Equal(t, want.layer, l, name)
			assert.Equal(t, want.rest, rest, name)
		}
	}
}

func TestNames(t *testing.T) {
	assert.Equal(t, "model.layers.12.", Layer(12))
	assert.Equal(t, "model.layers.0.block_sparse_moe.", Layer(0)+MoE)
	assert.True(t, IsRoutedExpert("language_model.model.layers.3.block_sparse_moe.experts.7.w1.weight"))
	assert.False(t, IsRoutedExpert("model.layers.3.block_sparse_moe.gate.weight"))
	assert.True(t, IsModelTable("model.embed_tokens.weight"))
	assert.True(t, IsModelTable("lm_head.weight"))
	assert.True(t, IsModelTable("model.output_attn_res_proj.weight"))
	assert.False(t, IsModelTable("model.layers.0.input_layernorm.weight"))
	assert.False(t, IsModelTable("vision_tower.x"))
}

func TestLayers(t *testing.T) {
	names := []string{"language_model.model.embed_tokens.weight", "language_model.model.layers.0.a", "language_model.model.layers.4.b",
		"language_model.model.layers.2.block_sparse_moe.experts.1.w", "vision_tower.layers.9.x"}
	assert.Equal(t, 5, Layers(names, ReleasePrefix))
	assert.Equal(t, 0, Layers(names, ""), "names under another prefix do not count")
	assert.Equal(t, 0, Layers(nil, ""))
}

func TestDetectPrefix(t *testing.T) {
	set := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, m := range names {
				if m == n {
					return true
				}
			}
			return false
		}
	}
	p, err := DetectPrefix(set("language_model.model.embed_tokens.weight"))
	require.NoError(t, err)
	assert.Equal(t, ReleasePrefix, p)
	p, err = DetectPrefix(set("model.embed_tokens.weight"))
	require.NoError(t, err)
	assert.Equal(t, "", p)
	_, err = DetectPrefix(set("lm_head.weight"))
	assert.ErrorContains(t, err, "no embedding tensor")
}
