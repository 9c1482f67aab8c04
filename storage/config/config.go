// Package config reads a Kimi K3 config.json and refuses to guess: every
// field the model's math needs must be present and well typed, and one error
// lists every problem found.
//
// Two shapes are accepted: the released nested one (KimiK3Config with the
// text model under "text_config", "linear_attn_config" and
// "quantization_config" inside it) and the plain KimiLinear text config (the
// same fields at the top level). For compatibility with the C engine's test
// fixtures, the flat aliases kda_num_heads, kda_head_dim, situ_beta and
// situ_linear_beta and top-level layer lists are also understood.
package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"k3/storage/regfile"
	"k3/storage/strictjson"
)

// Config is the validated text-model configuration.
type Config struct {
	Path   string
	Nested bool // released KimiK3Config shape

	VocabSize, Hidden, Layers int
	RMSEps                    float32
	TieEmbeddings             bool

	// KDA (linear attention)
	KDAHeads, KDAHeadDim, ConvK int
	GateLowerBound              float32

	// MLA
	Heads, QLoraRank, KVLoraRank, QKNope, QKRope, VHead int
	OutputGate                                          bool

	// MLPs
	Intermediate, FirstKDense              int
	Experts, TopK, SharedExperts, MoEInter int
	Latent                                 int
	LatentNorm, Renormalize                bool
	RoutedScale                            float32
	SituBeta, SituLinearBeta               float32
	AttnResBlock                           int
	ExpertsMXFP4                           bool   // quantization_config says mxfp4-pack-quantized
	BOS, EOS, PAD                          int    // -1 when absent
	MLA                                    []bool // per 0-based layer
	FullAttnLayers, KDALayers              []int  // ONE-based, as in the file
}

// IsMLA reports whether 0-based layer i is a full-attention (MLA) layer.
func (c *Config) IsMLA(i int) bool { return c.MLA[i] }

// IsDense reports whether 0-based layer i uses the dense MLP instead of MoE.
func (c *Config) IsDense(i int) bool { return i < c.FirstKDense }

// LayerKind names 0-based layer i's blocks: its attention ("kda" or
// "mla") and its MLP ("dense" or "moe"), e.g. "kda+moe". Benchmarks time
// layers per kind.
func (c *Config) LayerKind(i int) string {
	a := "kda"
	if c.IsMLA(i) {
		a = "mla"
	}
	if c.IsDense(i) {
		return a + "+dense"
	}
	return a + "+moe"
}

// Summary is the one-line description printed when a model is loaded.
func (c *Config) Summary() string {
	nm := 0
	for _, m := range c.MLA {
		if m {
			nm++
		}
	}
	shape := "flat"
	if c.Nested {
		shape = "nested"
	}
	return fmt.Sprintf("config: %s (%s shape) | hidden=%d layers=%d vocab=%d | %d MLA + %d KDA | experts %d top%d shared %d | latent=%d",
		c.Path, shape, c.Hidden, c.Layers, c.VocabSize, nm, c.Layers-nm, c.Experts, c.TopK, c.SharedExperts, c.Latent)
}

// Error lists every problem found in a config.
type Error struct {
	Path     string
	Missing  []string
	Mistyped []string
	Invalid  []string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s is refused", e.Path)
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "\n  missing %d required field(s): %s", len(e.Missing), strings.Join(e.Missing, ", "))
	}
	if len(e.Mistyped) > 0 {
		fmt.Fprintf(&b, "\n  mistyped: %s", strings.Join(e.Mistyped, "; "))
	}
	if len(e.Invalid) > 0 {
		fmt.Fprintf(&b, "\n  invalid: %s", strings.Join(e.Invalid, "; "))
	}
	b.WriteString("\n  refusing to substitute defaults: a config the engine cannot fully understand would silently produce a different model")
	return b.String()
}

// Load reads and validates a config file.
func Load(path string) (*Config, error) {
	raw, err := regfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, raw)
}

type object map[string]json.RawMessage

func decodeObject(raw json.RawMessage) (object, bool) {
	var o object
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	if json.Unmarshal(raw, &o) != nil {
		return nil, false
	}
	return o, true
}

type reader struct {
	e      *Error
	model  object // text_config or root
	root   object
	linear object // linear_attn_config (may be nil)
}

// find looks a key up in the given objects in order (nil objects skipped).
func find(key string, objs ...object) (json.RawMessage, bool) {
	for _, o := range objs {
		if o == nil {
			continue
		}
		if v, ok := o[key]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return v, true
		}
	}
	return nil, false
}

func (r *reader) lookup(name string, alias string, objs ...object) (json.RawMessage, string, bool) {
	if v, ok := find(name, objs...); ok {
		return v, name, true
	}
	if alias != "" {
		if v, ok := find(alias, objs...); ok {
			return v, alias, true
		}
	}
	return nil, name, false
}

func (r *reader) num(name, alias string, objs ...object) (float64, string, bool) {
	v, key, ok := r.lookup(name, alias, objs...)
	if !ok {
		r.e.Missing = append(r.e.Missing, name)
		return 0, key, false
	}
	var f float64
	if json.Unmarshal(v, &f) != nil {
		r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s is %s, want a number", key, kind(v)))
		return 0, key, false
	}
	return f, key, true
}

func (r *reader) int(name, alias string, objs ...object) int {
	f, key, ok := r.num(name, alias, objs...)
	if !ok {
		return 0
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s is %v, want an integer", key, f))
		return 0
	}
	return int(f)
}

func (r *reader) float(name, alias string, objs ...object) float32 {
	f, key, ok := r.num(name, alias, objs...)
	if ok && math.IsInf(float64(float32(f)), 0) {
		r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("%s = %v is outside the float32 range", key, f))
		return 0
	}
	return float32(f)
}

func (r *reader) boolean(name string, objs ...object) bool {
	v, key, ok := r.lookup(name, "", objs...)
	if !ok {
		r.e.Missing = append(r.e.Missing, name)
		return false
	}
	var b bool
	if json.Unmarshal(v, &b) != nil {
		r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s is %s, want true or false", key, kind(v)))
	}
	return b
}

// optional checks that an optional field, when present, has the only value
// the engine implements.
func (r *reader) optional(name string, want any, objs ...object) {
	v, ok := find(name, objs...)
	if !ok {
		return
	}
	var got any
	if json.Unmarshal(v, &got) != nil {
		r.e.Mistyped = append(r.e.Mistyped, name+" is not valid JSON")
		return
	}
	if w, isNum := want.(float64); isNum {
		if g, ok := got.(float64); ok && g == w {
			return
		}
	} else if got == want {
		return
	}
	r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("%s = %s is not supported (this engine implements %v)", name, bytes.TrimSpace(v), want))
}

func kind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func (r *reader) layerList(name string, objs ...object) ([]int, bool) {
	v, ok := find(name, objs...)
	if !ok {
		return nil, false
	}
	var arr []json.RawMessage
	if json.Unmarshal(v, &arr) != nil {
		r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s is %s, want an array of layer numbers", name, kind(v)))
		return nil, true
	}
	out := make([]int, 0, len(arr))
	for i, a := range arr {
		var f float64
		if json.Unmarshal(a, &f) != nil || f != math.Trunc(f) {
			r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s[%d] is not an integer", name, i))
			continue
		}
		out = append(out, int(f))
	}
	return out, true
}

// NotAnObject is Error.Invalid's entry for a file that is not one JSON
// object (empty, cut short, random bytes, a list).
const NotAnObject = "the file is not a JSON object"

// openObject reads a config file's bytes as one JSON object that says one
// thing: encoding/json keeps the last of two equal keys and turns invalid
// UTF-8 into U+FFFD, so both are refused. The error collects what the
// reader finds later; it is returned when it already holds something.
func openObject(path string, raw []byte) (object, *Error) {
	e := &Error{Path: path}
	root, ok := decodeObject(raw)
	if !ok {
		e.Invalid = append(e.Invalid, NotAnObject)
		return nil, e
	}
	if err := strictjson.Check(raw); err != nil {
		e.Invalid = append(e.Invalid, err.Error())
	}
	return root, e
}

// Parse validates a config from its bytes; path is used in messages.
func Parse(path string, raw []byte) (*Config, error) {
	root, e := openObject(path, raw)
	if len(e.Invalid) > 0 {
		return nil, e
	}
	c := &Config{Path: path, BOS: -1, EOS: -1, PAD: -1}
	r := &reader{e: e, root: root, model: root}
	if tc, ok := root["text_config"]; ok {
		m, ok := decodeObject(tc)
		if !ok {
			e.Mistyped = append(e.Mistyped, "text_config is not an object")
			return nil, e
		}
		r.model, c.Nested = m, true
	}
	if lc, ok := find("linear_attn_config", r.model, root); ok {
		m, ok := decodeObject(lc)
		if !ok {
			e.Mistyped = append(e.Mistyped, "linear_attn_config is not an object")
		}
		r.linear = m
	}
	c.readAttention(r)
	c.readMoE(r)
	c.readFixed(r)
	c.readQuant(r)

	// Layer map: ONE-based lists, in linear_attn_config (or top level in the flat shape).
	full, haveFull := r.layerList("full_attn_layers", r.linear, r.model)
	kda, haveKDA := r.layerList("kda_layers", r.linear, r.model)
	if !haveFull {
		e.Missing = append(e.Missing, "linear_attn_config.full_attn_layers")
	}
	c.FullAttnLayers, c.KDALayers = full, kda
	c.validate(e, full, kda, haveKDA)

	if len(e.Missing)+len(e.Mistyped)+len(e.Invalid) > 0 {
		return nil, e
	}
	return c, nil
}

// readAttention reads the model's size and its two attentions' fields.
func (c *Config) readAttention(r *reader) {
	M, L := r.model, r.linear
	c.Hidden = r.int("hidden_size", "", M)
	c.Layers = r.int("num_hidden_layers", "", M)
	c.VocabSize = r.int("vocab_size", "", M)
	c.RMSEps = r.float("rms_norm_eps", "", M)

	// KDA fields: linear_attn_config first (so a model-level num_heads can never
	// shadow them), then the C engine's flat aliases.
	if L != nil {
		c.KDAHeads = r.int("num_heads", "", L)
		c.KDAHeadDim = r.int("head_dim", "", L)
		c.ConvK = r.int("short_conv_kernel_size", "", L)
		c.GateLowerBound = r.float("gate_lower_bound", "", L)
		r.optional("use_full_rank_gate", true, L)
	} else {
		c.KDAHeads = r.int("linear_attn_config.num_heads", "kda_num_heads", M)
		c.KDAHeadDim = r.int("linear_attn_config.head_dim", "kda_head_dim", M)
		c.ConvK = r.int("short_conv_kernel_size", "", M)
		c.GateLowerBound = r.float("gate_lower_bound", "", M)
	}

	c.Heads = r.int("num_attention_heads", "", M)
	c.QLoraRank = r.int("q_lora_rank", "", M)
	c.KVLoraRank = r.int("kv_lora_rank", "", M)
	c.QKNope = r.int("qk_nope_head_dim", "", M)
	c.QKRope = r.int("qk_rope_head_dim", "", M)
	c.VHead = r.int("v_head_dim", "", M)
	c.OutputGate = r.boolean("mla_use_output_gate", M)
}

// readMoE reads the dense and mixture-of-experts layers' fields.
func (c *Config) readMoE(r *reader) {
	M := r.model
	c.Intermediate = r.int("intermediate_size", "", M)
	c.FirstKDense = r.int("first_k_dense_replace", "", M)
	c.Experts = r.int("num_experts", "", M)
	c.TopK = r.int("num_experts_per_token", "", M)
	c.SharedExperts = r.int("num_shared_experts", "", M)
	c.MoEInter = r.int("moe_intermediate_size", "", M)
	c.Latent = r.int("routed_expert_hidden_size", "", M)
	c.LatentNorm = r.boolean("latent_moe_use_norm", M)
	c.Renormalize = r.boolean("moe_renormalize", M)
	c.RoutedScale = r.float("routed_scaling_factor", "", M)
	c.SituBeta = r.float("activation_situ_beta", "situ_beta", M)
	c.SituLinearBeta = r.float("activation_situ_linear_beta", "situ_linear_beta", M)
	c.AttnResBlock = r.int("attn_res_block_size", "", M)
}

// readFixed checks the fields the engine implements one value of (when
// present they must have it) and reads the tied embeddings and token ids.
func (c *Config) readFixed(r *reader) {
	M, e := r.model, r.e
	r.optional("mla_use_nope", true, M)
	r.optional("hidden_act", "situ", M)
	r.optional("moe_router_activation_func", "sigmoid", M)
	r.optional("moe_layer_freq", 1.0, M)
	r.optional("num_expert_group", 1.0, M)
	r.optional("topk_group", 1.0, M)
	if v, ok := find("tie_word_embeddings", M, r.root); ok {
		if json.Unmarshal(v, &c.TieEmbeddings) != nil {
			e.Mistyped = append(e.Mistyped, "tie_word_embeddings is "+kind(v)+", want true or false")
		}
	}
	if v, ok := find("num_key_value_heads", M); ok {
		var kv float64
		if json.Unmarshal(v, &kv) != nil || int(kv) != c.Heads && c.Heads > 0 {
			e.Invalid = append(e.Invalid, fmt.Sprintf("num_key_value_heads = %s differs from num_attention_heads = %d (MLA uses one KV head per query head)", bytes.TrimSpace(v), c.Heads))
		}
	}
	for _, k := range []struct {
		name string
		dst  *int
	}{{"bos_token_id", &c.BOS}, {"eos_token_id", &c.EOS}, {"pad_token_id", &c.PAD}} {
		if v, ok := find(k.name, M, r.root); ok {
			*k.dst = r.tokenID(k.name, v, c.VocabSize)
		}
	}
}

// tokenID reads a special token id: an integer in 0..vocab-1, or a list of
// them (Hugging Face allows several eos ids; the first is kept).
func (r *reader) tokenID(name string, v json.RawMessage, vocab int) int {
	var list []json.RawMessage
	if json.Unmarshal(v, &list) == nil {
		if len(list) == 0 {
			r.e.Invalid = append(r.e.Invalid, name+" is an empty list")
			return -1
		}
		first := -1
		for i, x := range list {
			id := r.tokenID(fmt.Sprintf("%s[%d]", name, i), x, vocab)
			if i == 0 {
				first = id
			}
		}
		return first
	}
	var f float64
	if json.Unmarshal(v, &f) != nil || f != math.Trunc(f) {
		r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("%s is %s, want a token id", name, kind(v)))
		return -1
	}
	if f < 0 || (vocab > 0 && f >= float64(vocab)) {
		r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("%s = %v is outside the vocabulary 0..%d", name, f, vocab-1))
		return -1
	}
	return int(f)
}

func (c *Config) readQuant(r *reader) {
	v, ok := find("quantization_config", r.model, r.root)
	if !ok {
		return // experts' storage type then comes from the tensors themselves
	}
	var q struct {
		QuantMethod  string `json:"quant_method"`
		Format       string `json:"format"`
		ConfigGroups map[string]struct {
			Format  string `json:"format"`
			Weights struct {
				NumBits   int    `json:"num_bits"`
				Type      string `json:"type"`
				Strategy  string `json:"strategy"`
				GroupSize int    `json:"group_size"`
			} `json:"weights"`
		} `json:"config_groups"`
	}
	if err := json.Unmarshal(v, &q); err != nil {
		r.e.Mistyped = append(r.e.Mistyped, "quantization_config: "+err.Error())
		return
	}
	if q.Format != "mxfp4-pack-quantized" {
		r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("quantization_config.format %q is not supported (mxfp4-pack-quantized is)", q.Format))
		return
	}
	for name, g := range q.ConfigGroups {
		w := g.Weights
		if w.NumBits != 4 || w.Type != "float" || w.GroupSize != 32 || (w.Strategy != "" && w.Strategy != "group") {
			r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("quantization_config.config_groups.%s: %d-bit %s weights in groups of %d are not MXFP4 (4-bit float, groups of 32)", name, w.NumBits, w.Type, w.GroupSize))
		}
	}
	c.ExpertsMXFP4 = true
}

func (c *Config) validate(e *Error, full, kda []int, haveKDA bool) {
	bad := func(f string, a ...any) { e.Invalid = append(e.Invalid, fmt.Sprintf(f, a...)) }
	for _, p := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.Hidden}, {"num_hidden_layers", c.Layers}, {"vocab_size", c.VocabSize},
		{"linear_attn_config.num_heads", c.KDAHeads}, {"linear_attn_config.head_dim", c.KDAHeadDim},
		{"short_conv_kernel_size", c.ConvK}, {"num_attention_heads", c.Heads}, {"q_lora_rank", c.QLoraRank},
		{"kv_lora_rank", c.KVLoraRank}, {"qk_nope_head_dim", c.QKNope}, {"qk_rope_head_dim", c.QKRope},
		{"v_head_dim", c.VHead}, {"intermediate_size", c.Intermediate}, {"num_experts", c.Experts},
		{"num_experts_per_token", c.TopK}, {"moe_intermediate_size", c.MoEInter},
		{"routed_expert_hidden_size", c.Latent}, {"attn_res_block_size", c.AttnResBlock},
	} {
		if p.v <= 0 && !contains(e.Missing, p.name) {
			bad("%s = %d must be positive", p.name, p.v)
		}
	}
	if c.SharedExperts < 0 {
		bad("num_shared_experts = %d must not be negative", c.SharedExperts)
	}
	if c.FirstKDense < 0 || (c.Layers > 0 && c.FirstKDense > c.Layers) {
		bad("first_k_dense_replace = %d is outside 0..%d", c.FirstKDense, c.Layers)
	}
	if c.TopK > c.Experts && c.Experts > 0 {
		bad("num_experts_per_token = %d exceeds num_experts = %d", c.TopK, c.Experts)
	}
	if c.TopK > 64 {
		bad("num_experts_per_token = %d exceeds 64", c.TopK)
	}
	if c.RMSEps <= 0 && !contains(e.Missing, "rms_norm_eps") {
		bad("rms_norm_eps = %v must be positive", c.RMSEps)
	}
	if c.GateLowerBound >= 0 && !contains(e.Missing, "gate_lower_bound") {
		bad("gate_lower_bound = %v must be negative", c.GateLowerBound)
	}
	for _, m := range []struct {
		name string
		v    int
	}{{"routed_expert_hidden_size", c.Latent}, {"moe_intermediate_size", c.MoEInter}} {
		if c.ExpertsMXFP4 && m.v > 0 && m.v%32 != 0 {
			bad("%s = %d is not a multiple of 32 (MXFP4 groups)", m.name, m.v)
		}
	}
	if c.Layers > 4096 {
		bad("num_hidden_layers = %d is implausibly large (at most 4096)", c.Layers)
	}
	if c.Layers <= 0 || c.Layers > 4096 {
		return
	}
	c.mapLayers(bad, full, kda, haveKDA)
}

// mapLayers marks each layer MLA or KDA from the ONE-based lists full and
// kda (without kda, every layer not in full is KDA), reporting a layer out
// of range, listed twice or in neither list.
func (c *Config) mapLayers(bad func(string, ...any), full, kda []int, haveKDA bool) {
	c.MLA = make([]bool, c.Layers)
	seen := map[int]string{}
	check := func(name string, list []int, mla bool) {
		for i, n := range list {
			if n < 1 || n > c.Layers {
				bad("%s[%d] = %d is outside 1..%d (the list is ONE-based)", name, i, n, c.Layers)
				continue
			}
			if prev, dup := seen[n]; dup {
				bad("layer %d is listed in both %s and %s", n, prev, name)
				continue
			}
			seen[n] = name
			c.MLA[n-1] = mla
		}
	}
	check("full_attn_layers", full, true)
	if haveKDA {
		check("kda_layers", kda, false)
		var missing []int
		for n := 1; n <= c.Layers; n++ {
			if _, ok := seen[n]; !ok {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			bad("layers %v are in neither kda_layers nor full_attn_layers", missing)
		}
	} else if len(full) >= c.Layers {
		bad("full_attn_layers lists %d of %d layers, leaving no KDA layers", len(full), c.Layers)
	}
	sort.Ints(c.FullAttnLayers)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ExpertBytes is the size of one routed expert: its three MXFP4 projections
// (w1 and w3 latent -> MoE width, w2 back), packed two weights a byte with
// one E8M0 scale byte per 32 weights.
func (c *Config) ExpertBytes() int64 {
	return int64(2*c.MoEInter*(c.Latent/2+c.Latent/32) + c.Latent*(c.MoEInter/2+c.MoEInter/32))
}
