// Package layout is the checkpoint's tensor naming, in one place: the
// release's optional "language_model." prefix, "model.layers.N." per
// decoder layer, the parts of a layer (attention, dense MLP, MoE) and the
// routed experts' infix. The engine, the trunk packer, verify, the
// measurements and the synthetic checkpoints all read names through it.
// It imports nothing of k3.
package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// ReleasePrefix is the tensor name prefix of the released checkpoint (the
// text model inside the multimodal one); smaller checkpoints have none.
const ReleasePrefix = "language_model."

// Embedding is the token embedding's name after the prefix: a checkpoint
// has it under exactly one of the two prefixes.
const Embedding = "model.embed_tokens.weight"

// LayerPrefix starts every decoder layer's tensor names (after the
// checkpoint's prefix).
const LayerPrefix = "model.layers."

const routedExpert = ".block_sparse_moe.experts."

// Parts of a decoder layer: a layer's tensor names after Layer(i) start
// with one of these.
const (
	DenseMLP = "mlp."              // layer 0's dense SiTU MLP
	MoE      = "block_sparse_moe." // the router, shared and routed experts
)

// Layer is the name prefix of decoder layer i, without the checkpoint's
// prefix: "model.layers.i.".
func Layer(i int) string { return LayerPrefix + strconv.Itoa(i) + "." }

// LayerOf returns the decoder layer a tensor belongs to, for names
// "language_model.model.layers.{i}.…" or "model.layers.{i}.…", and the name
// after "model.layers.{i}.". ok is false for every other tensor
// (embeddings, lm_head, final norms, output AttnRes, vision tower), and
// for an index with a sign, leading zeros or more than six digits.
func LayerOf(name string) (layer int, rest string, ok bool) {
	rest, _ = strings.CutPrefix(name, ReleasePrefix)
	rest, found := strings.CutPrefix(rest, LayerPrefix)
	if !found {
		return 0, "", false
	}
	num, rest, found := strings.Cut(rest, ".")
	if !found || num == "" || len(num) > 6 || (len(num) > 1 && num[0] == '0') {
		return 0, "", false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	i, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return i, rest, true
}

// IsRoutedExpert reports whether a tensor is one of a routed expert's
// (those are read per token from the shards, never part of the trunk).
func IsRoutedExpert(name string) bool { return strings.Contains(name, routedExpert) }

// IsModelTable reports whether a tensor after the prefix is one of the
// model's own tables outside the layers (embedding, lm_head, final norm,
// output AttnRes).
func IsModelTable(name string) bool {
	_, _, inLayer := LayerOf(name)
	return !inLayer && (strings.HasPrefix(name, "model.") || strings.HasPrefix(name, "lm_head."))
}

// Layers is one more than the highest decoder layer index among names
// that start with prefix (0 when there is none).
func Layers(names []string, prefix string) int {
	n := 0
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if i, _, ok := LayerOf(rest); ok && i >= n && !strings.HasPrefix(rest, ReleasePrefix) {
			n = i + 1
		}
	}
	return n
}

// DetectPrefix tells which prefix a checkpoint's names carry from whether
// it has the embedding under the release's prefix or under none.
func DetectPrefix(has func(name string) bool) (string, error) {
	switch {
	case has(ReleasePrefix + Embedding):
		return ReleasePrefix, nil
	case has(Embedding):
		return "", nil
	}
	return "", fmt.Errorf("not a Kimi K3 checkpoint: no embedding tensor (expected %s%s or %s)", ReleasePrefix, Embedding, Embedding)
}
