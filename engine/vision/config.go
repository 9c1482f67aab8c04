// Package vision is Kimi K3's vision tower (MoonViT3d) and projector
// (patchmergerv2): it turns an image's normalised patches into the input
// embeddings of the image's pad positions in the prompt. The math and its
// sources are in docs/VISION.md; the float64 reference is
// tools/reference/vision_ref.py.
//
// Every matrix product goes through the kernels (kernels/doc.go contract),
// attention scores and softmax are float64, and element-wise functions are
// evaluated in float64 and rounded once, so the embeddings are bit-identical
// at every thread count and SIMD level.
package vision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k3/storage/strictjson"
)

// Config is the part of config.json's vision_config the tower uses.
type Config struct {
	Hidden     int // vt_hidden_size (D)
	Inter      int // vt_intermediate_size
	Layers     int // vt_num_hidden_layers
	Heads      int // vt_num_attention_heads
	QKV        int // qkv_hidden_size (heads x head dim)
	HeadDim    int
	Patch      int // patch_size (pixels per side)
	PosH, PosW int // init_pos_emb_height, init_pos_emb_width
	MergeH     int // merge_kernel_size
	MergeW     int
	TextHidden int     // text_hidden_size: the width of one image token
	ProjEps    float32 // projector_ln_eps
}

// NormEps is the tower's RMSNorm epsilon: the blocks build nn.RMSNorm with
// no eps, which PyTorch takes as the bf16 machine epsilon 2^-7 in the
// released bf16 tower (docs/VISION.md §3.4).
const NormEps = 1.0 / 128

// RopeTheta is the base of the 2D rotary frequencies.
const RopeTheta = 10000.0

// PatchDim is the length of one flattened patch (3 channels).
func (c *Config) PatchDim() int { return 3 * c.Patch * c.Patch }

// MergedDim is the width of one merged token before the projector.
func (c *Config) MergedDim() int { return c.Hidden * c.MergeH * c.MergeW }

// fixed lists the type fields k3 implements, with the one value it accepts.
var fixed = map[string]any{
	"pos_emb_type": "divided_fixed", "pos_emb_interpolation_mode": "bilinear", "merge_type": "sd2_tpool",
	"norm_type": "rmsnorm", "mlp_type": "mlp2", "activation_func": "gelu_pytorch_tanh",
	"mm_projector_type": "patchmergerv2", "projector_hidden_act": "gelu",
	"attn_bias": false, "linear_bias": false, "patch_embed_proj_bias": false,
}

var numeric = []string{
	"vt_hidden_size", "vt_intermediate_size", "vt_num_hidden_layers", "vt_num_attention_heads",
	"qkv_hidden_size", "patch_size", "init_pos_emb_height", "init_pos_emb_width", "merge_kernel_size",
	"mm_hidden_size", "text_hidden_size", "projector_ln_eps",
}

// ErrNoVision is returned (wrapped) by ReadConfig for a model without a
// vision tower.
var ErrNoVision = fmt.Errorf("this model has no vision tower (no vision_config in config.json)")

// ReadConfig reads vision_config from dir/config.json.
func ReadConfig(dir string) (*Config, error) {
	return ReadConfigFile(filepath.Join(dir, "config.json"))
}

// ReadConfigFile reads vision_config from a config.json file.
func ReadConfigFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := strictjson.Check(b); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	var top struct {
		Vision map[string]json.RawMessage `json:"vision_config"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if top.Vision == nil {
		return nil, ErrNoVision
	}
	return ParseConfig(top.Vision)
}

// ParseConfig checks a vision_config object. It names every missing field
// and every value k3 does not implement in one error.
func ParseConfig(raw map[string]json.RawMessage) (*Config, error) {
	var problems []string
	for _, k := range sortedKeys(fixed) {
		v, ok := raw[k]
		if !ok {
			problems = append(problems, "missing "+k)
			continue
		}
		want, _ := json.Marshal(fixed[k])
		if !bytes.Equal(bytes.TrimSpace(v), want) {
			problems = append(problems, fmt.Sprintf("%s is %s (k3 implements %s)", k, v, want))
		}
	}
	for _, k := range numeric {
		if _, ok := raw[k]; !ok {
			problems = append(problems, "missing "+k)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("vision_config: %s", strings.Join(problems, "; "))
	}
	c, err := numbers(raw)
	if err != nil {
		return nil, err
	}
	return c, c.check()
}

func numbers(raw map[string]json.RawMessage) (*Config, error) {
	c := &Config{}
	var mm int
	var merge []int
	var eps float64
	var errs []string
	for k, dst := range map[string]any{
		"vt_hidden_size": &c.Hidden, "vt_intermediate_size": &c.Inter, "vt_num_hidden_layers": &c.Layers,
		"vt_num_attention_heads": &c.Heads, "qkv_hidden_size": &c.QKV, "patch_size": &c.Patch,
		"init_pos_emb_height": &c.PosH, "init_pos_emb_width": &c.PosW, "merge_kernel_size": &merge,
		"mm_hidden_size": &mm, "text_hidden_size": &c.TextHidden, "projector_ln_eps": &eps,
	} {
		if err := json.Unmarshal(raw[k], dst); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("vision_config: %s", strings.Join(errs, "; "))
	}
	if len(merge) != 2 {
		return nil, fmt.Errorf("vision_config: merge_kernel_size %v is not two numbers", merge)
	}
	c.MergeH, c.MergeW = merge[0], merge[1]
	c.ProjEps = float32(eps)
	if mm != c.Hidden {
		return nil, fmt.Errorf("vision_config: mm_hidden_size %d differs from vt_hidden_size %d", mm, c.Hidden)
	}
	return c, nil
}

func (c *Config) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"vt_hidden_size", c.Hidden}, {"vt_intermediate_size", c.Inter}, {"vt_num_hidden_layers", c.Layers},
		{"vt_num_attention_heads", c.Heads}, {"qkv_hidden_size", c.QKV}, {"patch_size", c.Patch},
		{"init_pos_emb_height", c.PosH}, {"init_pos_emb_width", c.PosW}, {"merge_kernel_size", c.MergeH},
		{"merge_kernel_size", c.MergeW}, {"text_hidden_size", c.TextHidden}} {
		if v.n <= 0 || v.n > 1<<20 {
			return fmt.Errorf("vision_config: %s = %d is out of range", v.name, v.n)
		}
	}
	if c.QKV%c.Heads != 0 || (c.QKV/c.Heads)%4 != 0 {
		return fmt.Errorf("vision_config: qkv_hidden_size %d over %d heads is not a multiple of 4 per head", c.QKV, c.Heads)
	}
	if !(c.ProjEps > 0) {
		return fmt.Errorf("vision_config: projector_ln_eps %v is not positive", c.ProjEps)
	}
	c.HeadDim = c.QKV / c.Heads
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
