// Package plan holds the memory presets and the memory plan: how many bytes
// the trunk, the expert cache, the recurrent state and the KV cache take at a
// given budget. It imports nothing of the engine so the doctor can use it.
package plan

import (
	"errors"
	"fmt"
	"k3/storage/units"
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

// Presets are the C engine's budgets (the C engine's spec, section 4.3; not
// in this repository), smallest first, except ultra's expert cache: the C
// engine's 0.31 GB is top-k + 1 slots at K3 size, k3's is the smallest
// cache that keeps the disk's queue full (MinExpertSlots: 9 slots, 0.158
// GB; the hit rate is near zero either way at this size). Their notes say what each is for;
// the memory each takes is k3's own plan of it (Table), not the C engine's
// figures. "auto" picks one of them from the available memory (Resolve)
// and is not in this table.
var Presets = []Preset{
	{"ultra", 2.5, 0.16, true, "embedding and lm_head streamed too; the smallest. Slow."},
	{"laptop", 3.0, 1.0, false, "the ordinary-path floor: every layer streamed, embedding rows read when needed."},
	{"desktop", 16.0, 10.0, false, "some layers pinned."},
	{"workstation", 60.0, 30.0, false, "most layers pinned; the expert cache starts to matter here."},
	{"server", 110.0, 13.0, false, "the whole trunk pinned. Fastest."},
	{"max", 110.0, 109.0, false, "the whole trunk pinned and a large expert cache."},
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

// Table renders the presets the way `k3 presets` prints them, each with
// need(its budget): the memory k3's plan of it takes (doctor.Need: the
// released model, a 4K-position context; nil leaves it out).
func Table(need func(Budget) int64) string {
	var b strings.Builder
	b.WriteString("presets (trunk / expert-cache, in GB")
	if need != nil {
		b.WriteString("; k3's memory plan of each for Kimi K3 with a 4K-position context")
	}
	b.WriteString("):\n")
	for _, p := range Presets {
		planned := ""
		if need != nil {
			planned = fmt.Sprintf("%6.2f GB planned  ", float64(need(p.Budget()))/GB)
		}
		fmt.Fprintf(&b, "  %-12s %6.2f / %-6.2f  %s%s\n", p.Name, p.TrunkGB, p.CacheGB, planned, p.Note)
	}
	b.WriteString("  auto         the largest preset whose memory plan fits the available memory (cgroup limits respected); what k3 doctor recommends.\n")
	b.WriteString("All presets stream the trunk, so they need --trunk <packed_dir> (see 'k3 pack', 'k3 doctor').\n")
	return b.String()
}

// Budget is a preset resolved: the two budgets and whether the model
// tables are streamed too.
type Budget struct {
	Preset  string  // the preset's name ("auto" resolves to a named one)
	TrunkGB float64 // pinned trunk layers plus the streaming ring
	CacheGB float64 // routed-expert cache
	Ultra   bool    // embedding rows and lm_head streamed from the packed trunk
}

// Budget is the preset's budget.
func (p Preset) Budget() Budget {
	return Budget{Preset: p.Name, TrunkGB: p.TrunkGB, CacheGB: p.CacheGB, Ultra: p.Ultra}
}

// ErrUnknownPreset is wrapped by Resolve's error for a name that is no
// preset.
var ErrUnknownPreset = errors.New("unknown preset")

// Resolve is the one translation of a preset name into a budget, for the
// CLI's --preset, the app and the doctor.
//
// A named preset is its row of Presets (ultra included: Budget.Ultra); mem
// and need are not used.
//
// "auto" is the largest preset whose memory plan fits mem by the test
// Plan.Check applies (at most 95% of the usable memory: MemAvailable
// lowered to the cgroup's headroom), where need(b) is the total bytes of
// the memory plan at budget b (doctor.Need: the released model's plan
// made by Make). Because the doctor recommends exactly this choice, the
// doctor never recommends a preset the plan check refuses on the same
// memory. auto fails when the usable memory is unknown (mem nil or zero)
// or when not even the smallest preset fits.
func Resolve(name string, mem *Memory, need func(Budget) int64) (Budget, error) {
	if name != "auto" {
		p, ok := Lookup(name)
		if !ok {
			return Budget{}, fmt.Errorf("%w %q: one of %s", ErrUnknownPreset, name, strings.Join(Names(), ", "))
		}
		return p.Budget(), nil
	}
	if mem == nil || mem.Usable() <= 0 {
		return Budget{}, errors.New("auto: the available memory is unknown, so no preset can be chosen; pick one (see k3 presets)")
	}
	if need == nil {
		return Budget{}, errors.New("auto: no memory plan to fit")
	}
	for i := len(Presets) - 1; i >= 0; i-- {
		b := Presets[i].Budget()
		if fits(need(b), *mem) {
			return b, nil
		}
	}
	smallest := Presets[0].Budget()
	return Budget{}, fmt.Errorf("auto: only %s usable, and even the %s preset's memory plan needs %s (at most 95%% of the usable memory may be planned)",
		units.Bytes(mem.Usable()), smallest.Preset, units.Bytes(need(smallest)))
}
