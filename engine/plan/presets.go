// Package plan holds the memory presets and the memory plan: how many bytes
// the trunk, the expert cache, the recurrent state and the KV cache take at a
// given budget. It imports nothing of the engine so the doctor can use it.
package plan

import (
	"fmt"
	"strings"
)

// GB is the decimal gigabyte used by every budget flag (--trunk-gb, --cache-gb).
const GB = 1e9

// Preset is a named pair of memory budgets.
type Preset struct {
	Name    string
	TrunkGB float64 // pinned trunk layers plus the streaming ring
	CacheGB float64 // routed-expert cache
	Ultra   bool    // embedding rows and lm_head streamed too
	Note    string
}

// Presets are the C engine's budgets (seed-engine-spec §4.3), smallest first.
// "auto" is computed from available memory and is not in this table.
var Presets = []Preset{
	{"ultra", 2.5, 0.31, true, "~3 GB planned: streamed model tables, one state slot. Slow."},
	{"laptop", 3.0, 1.0, false, "8.2 GB peak RSS. The ordinary-path floor."},
	{"desktop", 16.0, 10.0, false, "31.9 GB peak RSS."},
	{"workstation", 60.0, 30.0, false, "95.5 GB peak RSS; the expert cache starts to matter here."},
	{"server", 110.0, 13.0, false, "~128 GB peak RSS; 90 of 93 trunk layers pinned. Fastest."},
	{"max", 110.0, 109.0, false, "~224 GB peak RSS; trunk pinned and a large expert cache."},
}

// Lookup finds a preset by name (not "auto").
func Lookup(name string) (Preset, bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// Names lists the preset names, "auto" last.
func Names() []string {
	n := make([]string, 0, len(Presets)+1)
	for _, p := range Presets {
		n = append(n, p.Name)
	}
	return append(n, "auto")
}

// Table renders the presets the way `k3 presets` prints them.
func Table() string {
	var b strings.Builder
	b.WriteString("presets (trunk / expert-cache, in GB):\n")
	for _, p := range Presets {
		fmt.Fprintf(&b, "  %-12s %6.2f / %-6.2f  %s\n", p.Name, p.TrunkGB, p.CacheGB, p.Note)
	}
	b.WriteString("  auto         fit from available memory (cgroup limits respected). Recommended.\n")
	b.WriteString("All presets stream the trunk, so they need --trunk <packed_dir> (see 'k3 pack', 'k3 doctor').\n")
	return b.String()
}
