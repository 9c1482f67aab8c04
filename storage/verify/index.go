package verify

import (
	"fmt"
	"sort"
	"strings"

	"k3/storage/layout"
	"k3/storage/safetensors"
)

// SafeName reports whether s is a plain file name usable inside a model
// directory: not empty, no path separators, not "." or "..", no NUL.
func SafeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00") && len(s) <= 255
}

// IsVision reports whether a tensor belongs to the vision tower or the
// multimodal projector, which the text-only engine never reads (shards 95
// and 96 of the release).
func IsVision(tensor string) bool {
	for _, p := range []string{"vision_tower.", "mm_projector.", "multi_modal_projector.", "vision_model."} {
		if strings.HasPrefix(tensor, p) {
			return true
		}
	}
	return false
}

// NumLayers returns 1 + the highest decoder layer index in the index (0 if
// there are none).
func NumLayers(ix *safetensors.Index) int {
	n := 0
	for name := range ix.All() {
		if l, _, ok := layout.LayerOf(name); ok && l+1 > n {
			n = l + 1
		}
	}
	return n
}

// ShardsForLayers returns the sorted shards a text-only engine needs to run
// the first n decoder layers: every shard holding a tensor of layers 0..n-1,
// plus every shard holding a non-layer text tensor (embed_tokens, lm_head,
// model.norm, output_attn_res_*), which are always needed. Vision tensors are
// skipped. n <= 0 means all layers.
func ShardsForLayers(ix *safetensors.Index, n int) ([]string, error) {
	total := NumLayers(ix)
	if n <= 0 {
		n = total
	}
	if n > total {
		return nil, fmt.Errorf("the index has %d layers; --layers %d is more than that", total, n)
	}
	set := map[string]bool{}
	for name, shard := range ix.All() {
		if l, _, ok := layout.LayerOf(name); ok {
			if l < n {
				set[shard] = true
			}
			continue
		}
		if !IsVision(name) {
			set[shard] = true
		}
	}
	return sortedKeys(set), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
