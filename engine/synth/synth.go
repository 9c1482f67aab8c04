// Package synth writes deterministic random checkpoints with the Kimi K3
// tensor graph in the released layout (nested config, language_model.
// prefix, BF16 trunk with F32 conv/A_log/dt_bias/o_norm, MXFP4 experts,
// sharded with an index). They exercise every code path of the engine at any
// size: small for tests and the demo model, real widths for benchmarks.
// The text they produce is meaningless.
package synth

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"k3/kernels"
	"k3/storage/atomicfile"
	"k3/storage/layout"
	st "k3/storage/safetensors"
)

// Spec describes the model to generate.
type Spec struct {
	Vocab, Hidden, Layers       int
	KDAHeads, KDAHeadDim, ConvK int
	Heads, QLora, KVLora        int
	Nope, Rope, VHead           int
	Inter, FirstDense           int
	Experts, TopK, Shared       int
	MoEInter, Latent            int
	Block                       int
	FullAttn                    []int // ONE-based MLA layers
	Seed                        uint64
	// F32Trunk stores every trunk matrix as F32 instead of BF16.
	F32Trunk bool
	// QuietSpecials zeroes the lm_head rows of the last 256 ids (the K3
	// special tokens of a byte-level demo vocabulary), so random weights
	// rarely emit control tokens and the demo shows streamed text.
	QuietSpecials bool
}

// Small is a spec of a few MB used by tests and the demo.
func Small() Spec {
	return Spec{Vocab: 512, Hidden: 64, Layers: 8, KDAHeads: 4, KDAHeadDim: 16, ConvK: 4,
		Heads: 4, QLora: 32, KVLora: 16, Nope: 16, Rope: 8, VHead: 16, Inter: 128, FirstDense: 1,
		Experts: 16, TopK: 4, Shared: 1, MoEInter: 64, Latent: 64, Block: 3, FullAttn: []int{3, 6, 8}, Seed: 1,
		QuietSpecials: true}
}

func (s Spec) isMLA(i int) bool {
	for _, n := range s.FullAttn {
		if n == i+1 {
			return true
		}
	}
	return false
}

// Config renders the nested release-shaped config.json.
func (s Spec) Config() map[string]any {
	var kda, full []int
	for i := 0; i < s.Layers; i++ {
		if s.isMLA(i) {
			full = append(full, i+1)
		} else {
			kda = append(kda, i+1)
		}
	}
	text := map[string]any{
		"model_type": "kimi_linear", "architectures": []string{"KimiLinearForCausalLM"},
		"vocab_size": s.Vocab, "hidden_size": s.Hidden, "num_hidden_layers": s.Layers,
		"num_attention_heads": s.Heads, "num_key_value_heads": s.Heads,
		"q_lora_rank": s.QLora, "kv_lora_rank": s.KVLora, "qk_nope_head_dim": s.Nope,
		"qk_rope_head_dim": s.Rope, "v_head_dim": s.VHead, "mla_use_nope": true, "mla_use_output_gate": true,
		"intermediate_size": s.Inter, "first_k_dense_replace": s.FirstDense, "moe_layer_freq": 1,
		"num_experts": s.Experts, "num_experts_per_token": s.TopK, "num_shared_experts": s.Shared,
		"moe_intermediate_size": s.MoEInter, "routed_expert_hidden_size": s.Latent,
		"latent_moe_use_norm": true, "moe_router_activation_func": "sigmoid", "moe_renormalize": true,
		"routed_scaling_factor": 1.0, "num_expert_group": 1, "topk_group": 1, "topk_method": "noaux_tc",
		"use_grouped_topk": true, "hidden_act": "situ", "activation_situ_beta": 4.0,
		"activation_situ_linear_beta": 25.0, "attn_res_block_size": s.Block, "rms_norm_eps": 1e-5,
		"tie_word_embeddings": false, "bos_token_id": s.Vocab - 256, "eos_token_id": s.Vocab - 254,
		"pad_token_id": s.Vocab - 1,
		"linear_attn_config": map[string]any{
			"num_heads": s.KDAHeads, "head_dim": s.KDAHeadDim, "short_conv_kernel_size": s.ConvK,
			"use_full_rank_gate": true, "gate_lower_bound": -5.0, "kda_layers": kda, "full_attn_layers": full,
		},
		"quantization_config": map[string]any{
			"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
			"config_groups": map[string]any{"group_0": map[string]any{
				"format": "mxfp4-pack-quantized", "targets": []string{"Linear"},
				"weights": map[string]any{"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": true},
			}},
		},
	}
	return map[string]any{
		"architectures": []string{"KimiK3ForConditionalGeneration"}, "model_type": "kimi_k3",
		"bos_token_id": s.Vocab - 256, "eos_token_id": s.Vocab - 254, "pad_token_id": s.Vocab - 1,
		"tie_word_embeddings": false, "text_config": text,
		"note": "synthetic K3-shaped checkpoint written by k3 (engine/synth): random weights, meaningless text",
	}
}

type gen struct {
	r    *rand.Rand
	f32  bool
	list []st.WriteTensor
}

const prefix = "language_model."

func (g *gen) uniform(n int, a float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((2*g.r.Float64() - 1) * a)
	}
	return v
}

func (g *gen) add(name string, dt st.DType, shape []int64, data []byte) {
	g.list = append(g.list, st.WriteTensor{Name: prefix + name, DType: dt, Shape: shape, Data: data})
}

// mat adds a projection matrix with uniform weights of variance 1/cols·gain².
func (g *gen) mat(name string, rows, cols int, gain float64) {
	v := g.uniform(rows*cols, gain*math.Sqrt(3/float64(cols)))
	g.trunk(name, []int64{int64(rows), int64(cols)}, v)
}

func (g *gen) trunk(name string, shape []int64, v []float32) {
	if g.f32 {
		g.add(name, st.F32, shape, st.EncodeF32(v))
	} else {
		g.add(name, st.BF16, shape, st.EncodeBF16(v))
	}
}

// norm adds a norm weight near 1.
func (g *gen) norm(name string, n int) {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(1 + 0.2*(g.r.Float64()-0.5))
	}
	g.trunk(name, []int64{int64(n)}, v)
}

func (g *gen) f32vec(name string, shape []int64, v []float32) {
	g.add(name, st.F32, shape, st.EncodeF32(v))
}

// mxfp4 adds an expert matrix: random codes with scales near 1/(2.9·sqrt(cols)).
func (g *gen) mxfp4(name string, rows, cols int) {
	packed := make([]byte, rows*cols/2)
	for i := range packed {
		packed[i] = byte(g.r.IntN(256))
	}
	base := 127 + int(math.Round(math.Log2(1/(2.93*math.Sqrt(float64(cols))))))
	scales := make([]byte, rows*cols/kernels.MXGroup)
	for i := range scales {
		scales[i] = byte(base - 1 + g.r.IntN(3))
	}
	g.add(name+".weight_packed", st.U8, []int64{int64(rows), int64(cols / 2)}, packed)
	g.add(name+".weight_scale", st.U8, []int64{int64(rows), int64(cols / kernels.MXGroup)}, scales)
}

// Write generates the checkpoint into dir: config.json, one shard per layer
// plus one for the embeddings and head, and model.safetensors.index.json.
func Write(dir string, s Spec) error { return WriteProgress(context.Background(), dir, s, nil) }

// WriteProgress is Write that stops between shards when ctx is done and calls
// progress (if set) after each shard with the shards and bytes written so
// far. The index is written last, so an interrupted checkpoint has none.
func WriteProgress(ctx context.Context, dir string, s Spec, progress func(shards, of int, bytes int64)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, _ := json.MarshalIndent(s.Config(), "", "  ")
	if err := atomicfile.Write(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	n := s.Layers + 1
	weightMap := map[string]string{}
	var total int64
	for shard := 0; shard < n; shard++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		g := &gen{r: rand.New(rand.NewPCG(s.Seed, uint64(shard)+1)), f32: s.F32Trunk}
		if shard == s.Layers {
			s.globals(g)
		} else {
			s.layer(g, shard)
		}
		name := st.ShardName(shard+1, n)
		if err := st.WriteFile(filepath.Join(dir, name), g.list, map[string]string{"format": "pt"}); err != nil {
			return err
		}
		for _, t := range g.list {
			weightMap[t.Name] = name
			total += int64(len(t.Data))
		}
		if progress != nil {
			progress(shard+1, n, total)
		}
	}
	return st.WriteIndex(dir, weightMap, total)
}

func (s Spec) globals(g *gen) {
	H := int64(s.Hidden)
	g.trunk("model.embed_tokens.weight", []int64{int64(s.Vocab), H}, g.uniform(s.Vocab*s.Hidden, 1.7))
	head := g.uniform(s.Vocab*s.Hidden, math.Sqrt(3/float64(s.Hidden)))
	if s.QuietSpecials && s.Vocab > 256 {
		clear(head[(s.Vocab-256)*s.Hidden:])
	}
	g.trunk("lm_head.weight", []int64{int64(s.Vocab), H}, head)
	g.norm("model.norm.weight", s.Hidden)
	g.norm("model.output_attn_res_norm.weight", s.Hidden)
	g.trunk("model.output_attn_res_proj.weight", []int64{1, H}, g.uniform(s.Hidden, 0.5))
}

func (s Spec) layer(g *gen, i int) {
	H := s.Hidden
	p := layout.Layer(i)
	g.norm(p+"input_layernorm.weight", H)
	g.norm(p+"post_attention_layernorm.weight", H)
	g.norm(p+"self_attention_res_norm.weight", H)
	g.trunk(p+"self_attention_res_proj.weight", []int64{1, int64(H)}, g.uniform(H, 0.5))
	g.norm(p+"mlp_res_norm.weight", H)
	g.trunk(p+"mlp_res_proj.weight", []int64{1, int64(H)}, g.uniform(H, 0.5))
	a := p + "self_attn."
	if s.isMLA(i) {
		g.mat(a+"q_a_proj.weight", s.QLora, H, 1)
		g.norm(a+"q_a_layernorm.weight", s.QLora)
		g.mat(a+"q_b_proj.weight", s.Heads*(s.Nope+s.Rope), s.QLora, 1)
		g.mat(a+"kv_a_proj_with_mqa.weight", s.KVLora+s.Rope, H, 1)
		g.norm(a+"kv_a_layernorm.weight", s.KVLora)
		g.mat(a+"kv_b_proj.weight", s.Heads*(s.Nope+s.VHead), s.KVLora, 1)
		g.mat(a+"o_proj.weight", H, s.Heads*s.VHead, 1)
		g.mat(a+"g_proj.weight", s.Heads*s.VHead, H, 1)
	} else {
		P := s.KDAHeads * s.KDAHeadDim
		g.mat(a+"q_proj.weight", P, H, 1)
		g.mat(a+"k_proj.weight", P, H, 1)
		g.mat(a+"v_proj.weight", P, H, 1)
		for _, c := range []string{"q_conv1d", "k_conv1d", "v_conv1d"} {
			g.f32vec(a+c+".weight", []int64{int64(P), 1, int64(s.ConvK)}, g.uniform(P*s.ConvK, 0.8))
		}
		g.mat(a+"f_a_proj.weight", s.KDAHeadDim, H, 1)
		g.mat(a+"f_b_proj.weight", P, s.KDAHeadDim, 1)
		g.mat(a+"b_proj.weight", s.KDAHeads, H, 1)
		alog := make([]float32, s.KDAHeadDim) // stored padded to head_dim, as released
		for h := 0; h < s.KDAHeads && h < len(alog); h++ {
			alog[h] = float32(-1 + 2*float64(h)/float64(max(1, s.KDAHeads-1)))
		}
		g.f32vec(a+"A_log", []int64{int64(len(alog))}, alog)
		dt := g.uniform(P, 2)
		for j := range dt {
			dt[j] -= 1
		}
		g.f32vec(a+"dt_bias", []int64{int64(P)}, dt)
		on := make([]float32, s.KDAHeadDim)
		for j := range on {
			on[j] = float32(1 + 0.2*(g.r.Float64()-0.5))
		}
		g.f32vec(a+"o_norm.weight", []int64{int64(s.KDAHeadDim)}, on)
		g.mat(a+"o_proj.weight", H, P, 1)
		g.mat(a+"g_proj.weight", P, H, 1)
	}
	if i < s.FirstDense {
		g.mat(p+"mlp.gate_proj.weight", s.Inter, H, 3)
		g.mat(p+"mlp.up_proj.weight", s.Inter, H, 3)
		g.mat(p+"mlp.down_proj.weight", H, s.Inter, 1)
		return
	}
	f := p + layout.MoE
	g.mat(f+"gate.weight", s.Experts, H, 1)
	g.f32vec(f+"gate.e_score_correction_bias", []int64{int64(s.Experts)}, g.uniform(s.Experts, 0.1))
	g.mat(f+"routed_expert_down_proj.weight", s.Latent, H, 1)
	g.mat(f+"routed_expert_up_proj.weight", H, s.Latent, 1)
	g.norm(f+"routed_expert_norm.weight", s.Latent)
	if s.Shared > 0 {
		w := s.Shared * s.MoEInter
		g.mat(f+"shared_experts.gate_proj.weight", w, H, 2)
		g.mat(f+"shared_experts.up_proj.weight", w, H, 2)
		g.mat(f+"shared_experts.down_proj.weight", H, w, 1)
	}
	for e := 0; e < s.Experts; e++ {
		x := fmt.Sprintf("%sexperts.%d.", f, e)
		g.mxfp4(x+"w1", s.MoEInter, s.Latent)
		g.mxfp4(x+"w3", s.MoEInter, s.Latent)
		g.mxfp4(x+"w2", s.Latent, s.MoEInter)
	}
}

// Medium is a ~40 MB spec where memory budgets matter (tests of streaming
// and eviction).
func Medium() Spec {
	return Spec{Vocab: 1024, Hidden: 256, Layers: 10, KDAHeads: 4, KDAHeadDim: 64, ConvK: 4,
		Heads: 4, QLora: 128, KVLora: 64, Nope: 32, Rope: 16, VHead: 32, Inter: 512, FirstDense: 1,
		Experts: 48, TopK: 6, Shared: 1, MoEInter: 256, Latent: 128, Block: 4, FullAttn: []int{4, 9, 10}, Seed: 3}
}

// Large is a ~600 MB spec for measuring plans against peak RSS and
// streaming throughput.
func Large() Spec {
	return Spec{Vocab: 8192, Hidden: 1024, Layers: 12, KDAHeads: 8, KDAHeadDim: 128, ConvK: 4,
		Heads: 8, QLora: 384, KVLora: 256, Nope: 64, Rope: 32, VHead: 64, Inter: 2048, FirstDense: 1,
		Experts: 64, TopK: 8, Shared: 1, MoEInter: 512, Latent: 512, Block: 4, FullAttn: []int{4, 8, 11, 12}, Seed: 5}
}
