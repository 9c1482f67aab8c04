package cachesim

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
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

// ParseHistogram reads the engine's expert_hist.json format.
func ParseHistogram(b []byte) (*Histogram, error) {
	var raw struct {
		NLayers  *int           `json:"n_layers"`
		NExperts *int           `json:"n_experts"`
		Counts   map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("expert histogram: %w", err)
	}
	if raw.NLayers == nil || raw.NExperts == nil || raw.Counts == nil {
		return nil, fmt.Errorf("expert histogram: want n_layers, n_experts and counts")
	}
	h := &Histogram{NLayers: *raw.NLayers, NExperts: *raw.NExperts, Counts: make(map[Request]int, len(raw.Counts))}
	for k, c := range raw.Counts {
		ls, es, ok := strings.Cut(k, ",")
		l, err1 := strconv.ParseInt(ls, 10, 32)
		e, err2 := strconv.ParseInt(es, 10, 32)
		if !ok || err1 != nil || err2 != nil || l < 0 || e < 0 {
			return nil, fmt.Errorf("expert histogram: bad key %q (want \"layer,expert\")", k)
		}
		if c < 0 {
			return nil, fmt.Errorf("expert histogram: negative count %d for %q", c, k)
		}
		h.Counts[Request{int32(l), int32(e)}] = c
	}
	return h, nil
}

// ReadHistogram reads expert_hist.json from path.
func ReadHistogram(path string) (*Histogram, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := ParseHistogram(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// Hottest returns up to n experts by descending count; ties go to the lower
// (layer, expert). Useful for choosing experts to pin from a previous run.
func (h *Histogram) Hottest(n int) []Request {
	keys := make([]Request, 0, len(h.Counts))
	for k, c := range h.Counts {
		if c > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if h.Counts[a] != h.Counts[b] {
			return h.Counts[a] > h.Counts[b]
		}
		if a.Layer != b.Layer {
			return a.Layer < b.Layer
		}
		return a.Expert < b.Expert
	})
	if n < len(keys) {
		keys = keys[:n]
	}
	return keys
}
