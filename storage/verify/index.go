package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// IndexFile is the Hugging Face safetensors index: tensor name -> shard.
const IndexFile = "model.safetensors.index.json"

// Index is a parsed model.safetensors.index.json.
type Index struct {
	TotalSize int64             // metadata.total_size (0 if absent)
	WeightMap map[string]string // tensor name -> shard file name
}

// maxIndexBytes bounds the index (the real one is a few tens of MB:
// 497,220 tensor names).
const maxIndexBytes = 512 << 20

// ParseIndex reads an index. It refuses an empty weight_map and shard names
// that are not plain *.safetensors file names (no directories, no "..").
func ParseIndex(r io.Reader) (*Index, error) {
	var raw struct {
		Metadata  map[string]json.RawMessage `json:"metadata"`
		WeightMap map[string]string          `json:"weight_map"`
	}
	dec := json.NewDecoder(io.LimitReader(r, maxIndexBytes))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("index: not valid JSON: %v", err)
	}
	if len(raw.WeightMap) == 0 {
		return nil, errors.New("index: weight_map is missing or empty")
	}
	ix := &Index{WeightMap: raw.WeightMap}
	if ts, ok := raw.Metadata["total_size"]; ok {
		// total_size is a number in the real files; tolerate a quoted one.
		s := strings.Trim(string(ts), `"`)
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && v >= 0 {
			ix.TotalSize = v
		}
	}
	for name, shard := range raw.WeightMap {
		if name == "" {
			return nil, errors.New("index: empty tensor name in weight_map")
		}
		if !SafeName(shard) || !strings.HasSuffix(shard, ".safetensors") {
			return nil, fmt.Errorf("index: tensor %q maps to %q, which is not a plain .safetensors file name", name, shard)
		}
	}
	return ix, nil
}

// ReadIndex parses dir/model.safetensors.index.json.
func ReadIndex(dir string) (*Index, error) {
	f, err := os.Open(filepath.Join(dir, IndexFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ix, err := ParseIndex(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, IndexFile), err)
	}
	return ix, nil
}

// SafeName reports whether s is a plain file name usable inside a model
// directory: not empty, no path separators, not "." or "..", no NUL.
func SafeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00") && len(s) <= 255
}

// LayerOf returns the decoder layer a tensor belongs to, for names
// "language_model.model.layers.{i}.…" or "model.layers.{i}.…". ok is false
// for every other tensor (embeddings, lm_head, final norms, output AttnRes,
// vision tower).
func LayerOf(tensor string) (layer int, ok bool) {
	rest, found := strings.CutPrefix(tensor, "language_model.")
	_ = found
	rest, found = strings.CutPrefix(rest, "model.layers.")
	if !found {
		return 0, false
	}
	num, _, found := strings.Cut(rest, ".")
	if !found || num == "" || len(num) > 6 {
		return 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	if len(num) > 1 && num[0] == '0' {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, false
	}
	return i, true
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

// Shards returns every shard the index names, sorted.
func (ix *Index) Shards() []string {
	set := map[string]bool{}
	for _, s := range ix.WeightMap {
		set[s] = true
	}
	return sortedKeys(set)
}

// NumLayers returns 1 + the highest decoder layer index in the index (0 if
// there are none).
func (ix *Index) NumLayers() int {
	n := 0
	for name := range ix.WeightMap {
		if l, ok := LayerOf(name); ok && l+1 > n {
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
func (ix *Index) ShardsForLayers(n int) ([]string, error) {
	total := ix.NumLayers()
	if n <= 0 {
		n = total
	}
	if n > total {
		return nil, fmt.Errorf("the index has %d layers; --layers %d is more than that", total, n)
	}
	set := map[string]bool{}
	for name, shard := range ix.WeightMap {
		if l, ok := LayerOf(name); ok {
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
