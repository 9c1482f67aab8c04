package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"k3/storage/regfile"
)

// Draft is a validated DSpark draft-model configuration (docs/DSPARK.md):
// a few dense MLA layers with rotary embedding that draft a block of
// tokens at once from the target's hidden states at TargetLayers.
type Draft struct {
	Path string

	VocabSize, Hidden, Layers int
	RMSEps                    float32

	Heads, QLoraRank, KVLoraRank, QKNope, QKRope, VHead int
	Intermediate                                        int

	// TargetHidden and TargetLayers say which target it reads: its hidden
	// size and the 0-based layers whose outputs context_proj takes
	// (concatenated in this order); TargetNumLayers is the target's layer
	// count when the config says it (0: not said).
	TargetHidden    int
	TargetLayers    []int
	TargetNumLayers int
	MaskToken       int
	MarkovRank      int

	// Rotary embedding of the qk_rope_head_dim dims: "default" (plain) or
	// "yarn" with its scaling parameters.
	RopeType                   string
	RopeTheta                  float64
	RopeFactor                 float64
	RopeOrigMax                float64
	RopeBetaFast, RopeBetaSlow float64
	RopeMscale, RopeMscaleAll  float64
}

// LoadDraft reads and validates a draft model's config file.
func LoadDraft(path string) (*Draft, error) {
	raw, err := regfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("draft config: %w", err)
	}
	return ParseDraft(path, raw)
}

// ParseDraft validates a draft config from its bytes; path is used in
// messages. Every missing field is named in one error.
func ParseDraft(path string, raw []byte) (*Draft, error) {
	root, e := openObject(path, raw)
	if len(e.Invalid) > 0 {
		return nil, e
	}
	r := &reader{e: e, root: root, model: root}
	M := root
	d := &Draft{Path: path}
	if v, ok := find("model_type", M); !ok {
		e.Missing = append(e.Missing, "model_type")
	} else {
		var mt string
		if json.Unmarshal(v, &mt) != nil || mt != "k3_dspark" {
			e.Invalid = append(e.Invalid, fmt.Sprintf("model_type = %s is not a DSpark draft model (k3_dspark)", bytes.TrimSpace(v)))
		}
	}
	d.Hidden = r.int("hidden_size", "", M)
	d.Intermediate = r.int("intermediate_size", "", M)
	d.Layers = r.int("num_hidden_layers", "", M)
	d.Heads = r.int("num_attention_heads", "", M)
	d.QLoraRank = r.int("q_lora_rank", "", M)
	d.KVLoraRank = r.int("kv_lora_rank", "", M)
	d.QKNope = r.int("qk_nope_head_dim", "", M)
	d.QKRope = r.int("qk_rope_head_dim", "", M)
	d.VHead = r.int("v_head_dim", "", M)
	d.VocabSize = r.int("vocab_size", "", M)
	d.RMSEps = r.float("rms_norm_eps", "", M)
	d.TargetHidden = r.int("target_hidden_size", "", M)
	nTaps := r.int("num_target_layers", "", M)
	taps, have := r.layerList("target_layer_ids", M)
	if !have {
		e.Missing = append(e.Missing, "target_layer_ids")
	}
	d.TargetLayers = taps
	d.MaskToken = r.int("mask_token_id", "", M)
	d.MarkovRank = r.int("markov_rank", "", M)
	d.readRope(r)
	r.optional("hidden_act", "silu", M)
	r.optional("mla_use_nope", false, M)
	r.optional("mla_use_output_gate", false, M)
	r.optional("mla_use_qk_norm", false, M)
	if v, ok := find("draft_vocab_size", M); ok {
		var n float64
		if json.Unmarshal(v, &n) != nil || int(n) != d.VocabSize {
			e.Invalid = append(e.Invalid, fmt.Sprintf("draft_vocab_size = %s differs from vocab_size = %d (a reduced draft vocabulary is not supported)", bytes.TrimSpace(v), d.VocabSize))
		}
	}
	if v, ok := find("target_num_hidden_layers", M); ok {
		var n float64
		if json.Unmarshal(v, &n) != nil || n != math.Trunc(n) || n <= 0 {
			e.Mistyped = append(e.Mistyped, fmt.Sprintf("target_num_hidden_layers is %s, want a positive integer", bytes.TrimSpace(v)))
		} else {
			d.TargetNumLayers = int(n)
		}
	}
	if have && !contains(e.Missing, "num_target_layers") && nTaps != len(taps) {
		e.Invalid = append(e.Invalid, fmt.Sprintf("num_target_layers = %d but target_layer_ids lists %d layers", nTaps, len(taps)))
	}
	d.validate(e, have)
	if len(e.Missing)+len(e.Mistyped)+len(e.Invalid) > 0 {
		return nil, e
	}
	return d, nil
}

// readRope reads rope_parameters (rope_type "default" or "yarn"), or
// without it a top-level rope_theta meaning plain rotary embedding.
func (d *Draft) readRope(r *reader) {
	v, ok := find("rope_parameters", r.root)
	if !ok {
		if _, has := find("rope_theta", r.root); !has {
			r.e.Missing = append(r.e.Missing, "rope_parameters")
			return
		}
		d.RopeType = "default"
		d.RopeTheta = float64(r.float("rope_theta", "", r.root))
		return
	}
	o, ok := decodeObject(v)
	if !ok {
		r.e.Mistyped = append(r.e.Mistyped, "rope_parameters is "+kind(v)+", want an object")
		return
	}
	f := func(key string) float64 {
		v, have := find(key, o)
		if !have {
			r.e.Missing = append(r.e.Missing, "rope_parameters."+key)
			return 0
		}
		var x float64
		if json.Unmarshal(v, &x) != nil {
			r.e.Mistyped = append(r.e.Mistyped, fmt.Sprintf("rope_parameters.%s is %s, want a number", key, kind(v)))
		}
		return x
	}
	typ, have := find("rope_type", o)
	if !have {
		r.e.Missing = append(r.e.Missing, "rope_parameters.rope_type")
	} else if json.Unmarshal(typ, &d.RopeType) != nil || d.RopeType != "yarn" && d.RopeType != "default" {
		r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("rope_parameters.rope_type = %s is not supported (this engine implements default and yarn)", bytes.TrimSpace(typ)))
	}
	d.RopeTheta = f("rope_theta")
	if d.RopeType != "yarn" {
		return
	}
	d.RopeFactor = f("factor")
	d.RopeOrigMax = f("original_max_position_embeddings")
	d.RopeBetaFast = f("beta_fast")
	d.RopeBetaSlow = f("beta_slow")
	d.RopeMscale = f("mscale")
	d.RopeMscaleAll = f("mscale_all_dim")
	if d.RopeFactor <= 0 || d.RopeOrigMax <= 0 {
		r.e.Invalid = append(r.e.Invalid, fmt.Sprintf("rope_parameters: factor = %v and original_max_position_embeddings = %v must be positive", d.RopeFactor, d.RopeOrigMax))
	}
}

func (d *Draft) validate(e *Error, haveTaps bool) {
	bad := func(f string, a ...any) { e.Invalid = append(e.Invalid, fmt.Sprintf(f, a...)) }
	for _, p := range []struct {
		name string
		v    int
	}{
		{"hidden_size", d.Hidden}, {"num_hidden_layers", d.Layers}, {"vocab_size", d.VocabSize},
		{"num_attention_heads", d.Heads}, {"q_lora_rank", d.QLoraRank}, {"kv_lora_rank", d.KVLoraRank},
		{"qk_nope_head_dim", d.QKNope}, {"qk_rope_head_dim", d.QKRope}, {"v_head_dim", d.VHead},
		{"intermediate_size", d.Intermediate}, {"target_hidden_size", d.TargetHidden}, {"markov_rank", d.MarkovRank},
	} {
		if p.v <= 0 && !contains(e.Missing, p.name) {
			bad("%s = %d must be positive", p.name, p.v)
		}
	}
	if d.QKRope%2 != 0 {
		bad("qk_rope_head_dim = %d must be even (rotary pairs)", d.QKRope)
	}
	if d.RMSEps <= 0 && !contains(e.Missing, "rms_norm_eps") {
		bad("rms_norm_eps = %v must be positive", d.RMSEps)
	}
	if d.RopeTheta <= 1 && d.RopeType != "" && !contains(e.Missing, "rope_parameters.rope_theta") {
		bad("rope_theta = %v must be greater than 1", d.RopeTheta)
	}
	if d.VocabSize > 0 && (d.MaskToken < 0 || d.MaskToken >= d.VocabSize) && !contains(e.Missing, "mask_token_id") {
		bad("mask_token_id = %d is outside the vocabulary 0..%d", d.MaskToken, d.VocabSize-1)
	}
	if haveTaps && len(d.TargetLayers) == 0 {
		bad("target_layer_ids is empty")
	}
	for i, l := range d.TargetLayers {
		if l < 0 {
			bad("target_layer_ids[%d] = %d is negative (the list is 0-based)", i, l)
		}
		if i > 0 && l <= d.TargetLayers[i-1] {
			bad("target_layer_ids must be strictly increasing: [%d] = %d follows %d", i, l, d.TargetLayers[i-1])
		}
	}
}
