package cachesim

import (
	"fmt"
	"sort"
	"strings"

	"k3/storage/atomicfile"
)

// Histogram is expert_hist.json, the per-expert request counts the engine
// writes beside the trace:
//
//	{"n_layers":93,"n_experts":896,"counts":{"L,E":count,...}}
//
// Counts is sparse: only experts requested at least once appear.
type Histogram struct {
	NLayers  int
	NExperts int
	Counts   map[Request]int
}

// NewHistogram counts the requests of a trace.
func NewHistogram(nLayers, nExperts int, reqs []Request) *Histogram {
	h := &Histogram{NLayers: nLayers, NExperts: nExperts, Counts: make(map[Request]int)}
	for _, r := range reqs {
		h.Counts[r]++
	}
	return h
}

// Marshal renders the histogram in the engine's format, keys in (layer,
// expert) order so the output is deterministic.
func (h *Histogram) Marshal() []byte {
	keys := make([]Request, 0, len(h.Counts))
	for k, c := range h.Counts {
		if c > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Layer != keys[j].Layer {
			return keys[i].Layer < keys[j].Layer
		}
		return keys[i].Expert < keys[j].Expert
	})
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"n_layers":%d,"n_experts":%d,"counts":{`, h.NLayers, h.NExperts)
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"%d,%d":%d`, k.Layer, k.Expert, h.Counts[k])
	}
	sb.WriteString("}}\n")
	return []byte(sb.String())
}

// WriteHistogram writes expert_hist.json for reqs to path atomically.
func WriteHistogram(path string, nLayers, nExperts int, reqs []Request) error {
	return atomicfile.Write(path, NewHistogram(nLayers, nExperts, reqs).Marshal())
}
