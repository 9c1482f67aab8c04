package engine

import (
	"fmt"
	"strings"

	"k3/doctor/machine"
	"k3/engine/plan"
	"k3/storage/config"
	st "k3/storage/safetensors"
)

// Budget is what a run asks of memory.
type Budget struct {
	Streaming  bool  // layers come from a packed trunk
	TrunkBytes int64 // pinned layers + ring
	Ring       int
	CacheBytes int64 // routed-expert cache
	Positions  int   // context needed: resumed + prompt + generated
	Chunk      int   // prefill chunk
	AllLogits  bool  // teacher forcing keeps logits for every position
	Ultra      bool  // embedding rows and lm_head chunks read from the trunk when needed
	// CachePolicy is the expert cache's replacement policy ("" = layer+r).
	CachePolicy string
}

func detectPrefix(set *st.Set) (string, error) {
	switch {
	case has(set, "language_model.model.embed_tokens.weight"):
		return "language_model.", nil
	case has(set, "model.embed_tokens.weight"):
		return "", nil
	}
	return "", fmt.Errorf("no embedding tensor: expected language_model.model.embed_tokens.weight or model.embed_tokens.weight")
}

// TrunkSizes adds up, from the checkpoint's metadata alone, the trunk bytes
// of each of the first `layers` layers and of the model tables (embeddings,
// lm_head, final norms). Routed experts are not trunk.
func TrunkSizes(set *st.Set, cfg *config.Config, layers int) (perLayer []int64, globals int64) {
	prefix, _ := detectPrefix(set)
	perLayer = make([]int64, layers)
	for _, name := range set.Names() {
		t, _ := set.Get(name)
		n := strings.TrimPrefix(name, prefix)
		var li int
		if _, err := fmt.Sscanf(n, "model.layers.%d.", &li); err == nil {
			if li < layers && !strings.Contains(n, ".block_sparse_moe.experts.") {
				perLayer[li] += t.Size
			}
			continue
		}
		if strings.HasPrefix(n, "model.") || strings.HasPrefix(n, "lm_head.") {
			globals += t.Size
		}
	}
	return perLayer, globals
}

// MakePlan adds up every part of a run's memory before anything is allocated.
func MakePlan(set *st.Set, cfg *config.Config, layers int, b Budget) *plan.Plan {
	if layers <= 0 || layers > cfg.Layers {
		layers = cfg.Layers
	}
	perLayer, globals := TrunkSizes(set, cfg, layers)
	c := cfg
	P := int64(c.KDAHeads * c.KDAHeadDim)
	var state, kvPerPos int64
	for i := 0; i < layers; i++ {
		if c.IsMLA(i) {
			kvPerPos += int64(c.KVLoraRank+c.QKRope) * 4
		} else {
			state += (P*int64(c.KDAHeadDim) + 3*P*int64(c.ConvK-1)) * 4
		}
	}
	chunk := int64(max(b.Chunk, 1))
	if b.Positions > 0 {
		chunk = min(chunk, int64(b.Positions))
	}
	widest := int64(max(c.Hidden, int(P), c.Intermediate, c.Heads*(c.QKNope+c.QKRope), c.Experts))
	// activations: the AttnRes block stack plus about a dozen layer-wide
	// buffers per position, and the logits
	buffers := chunk * 4 * (int64(c.Hidden)*int64(layers/max(c.AttnResBlock, 1)+14) + 8*widest)
	logitRows := int64(1)
	if b.AllLogits {
		logitRows = int64(max(b.Positions, 1))
	}
	buffers += logitRows * int64(c.VocabSize) * 4
	if b.Ultra {
		prefix, _ := detectPrefix(set)
		for _, n := range []string{"model.embed_tokens.weight", "lm_head.weight"} {
			if t, ok := set.Get(prefix + n); ok {
				globals -= t.Size
			}
		}
		buffers += headChunkBytes + int64(c.VocabSize)*4
	}
	expertBytes := int64(0)
	if c.Experts > 0 && layers > c.FirstKDense {
		expertBytes = slotSizeFor(expertSize(c))
	}
	return plan.Make(plan.Inputs{LayerBytes: perLayer, GlobalBytes: globals, ExpertBytes: expertBytes, TopK: c.TopK,
		MaxExperts: c.Experts * max(0, layers-c.FirstKDense),
		Streaming:  b.Streaming, TrunkBudget: b.TrunkBytes, Ring: b.Ring, CacheBudget: b.CacheBytes,
		StateBytes: state, KVPerPos: kvPerPos, Positions: b.Positions, BufferBytes: buffers, BaselineRSS: machine.RSS()})
}
