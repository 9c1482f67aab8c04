package plan

import (
	"fmt"
	"sort"
	"strings"

	"k3/storage/units"
)

// Inputs are the sizes a memory plan adds up. Byte sizes come from the
// checkpoint (or the packed trunk); budgets from flags or a preset.
type Inputs struct {
	LayerBytes  []int64 // trunk bytes of each bound layer
	GlobalBytes int64   // embeddings, lm_head, final norms (resident)
	ExpertBytes int64   // one routed expert (one cache slot)
	TopK        int
	MaxExperts  int   // experts in the bound MoE layers: a larger cache is never filled
	Streaming   bool  // --trunk given: layers may be streamed
	TrunkBudget int64 // pinned layers + ring
	Ring        int   // ring slots for streamed layers (>= 1)
	CacheBudget int64 // routed-expert cache
	StateBytes  int64 // KDA recurrent + conv state, all KDA layers
	KVPerPos    int64 // MLA latent cache bytes per position, all MLA layers
	Positions   int   // context the run needs (prompt + generation)
	BufferBytes int64 // activations, logits, scratch
	BaselineRSS int64 // the process before any of this is allocated
}

// Plan is the decided memory layout.
type Plan struct {
	Pinned      []bool // per layer: held in RAM for the whole run
	PinnedBytes int64
	RingSlots   int
	SlotBytes   int64 // size of one ring slot (largest streamed layer)
	RingBytes   int64
	CacheSlots  int
	CacheBytes  int64
	Globals     int64
	State       int64
	KV          int64
	Buffers     int64
	Baseline    int64
	Total       int64
	Notes       []string
}

// Make decides what to pin and how many slots to use. Layers are pinned
// largest first while they fit in the trunk budget left after the ring;
// when everything fits, everything is pinned and no ring is kept. Budgets
// below the minimum working set (one ring slot; top-k+1 expert slots) run
// at that minimum, with a note.
func Make(in Inputs) *Plan {
	p := &Plan{Pinned: make([]bool, len(in.LayerBytes)), Globals: in.GlobalBytes, State: in.StateBytes,
		KV: in.KVPerPos * int64(in.Positions), Buffers: in.BufferBytes, Baseline: in.BaselineRSS}
	var all int64
	for _, b := range in.LayerBytes {
		all += b
	}
	if !in.Streaming || all <= in.TrunkBudget {
		for i := range p.Pinned {
			p.Pinned[i] = true
		}
		p.PinnedBytes = all
		if in.Streaming && all <= in.TrunkBudget {
			p.Notes = append(p.Notes, "the whole trunk fits the budget: every layer is pinned")
		}
	} else {
		ring := max(in.Ring, 1)
		order := make([]int, len(in.LayerBytes))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return in.LayerBytes[order[a]] > in.LayerBytes[order[b]] })
		// pin the k largest layers for the largest k whose pins plus a ring
		// sized for the largest streamed layer fit the budget
		k := 0
		for k+1 < len(order) {
			next := p.PinnedBytes + in.LayerBytes[order[k]]
			if next+int64(ring)*in.LayerBytes[order[k+1]] > in.TrunkBudget {
				break
			}
			p.PinnedBytes = next
			p.Pinned[order[k]] = true
			k++
		}
		slot := in.LayerBytes[order[k]]
		p.SlotBytes = slot
		p.RingSlots = ring
		if p.PinnedBytes+int64(ring)*slot > in.TrunkBudget {
			for p.RingSlots > 1 && p.PinnedBytes+int64(p.RingSlots)*slot > in.TrunkBudget {
				p.RingSlots--
			}
			if p.PinnedBytes+int64(p.RingSlots)*slot > in.TrunkBudget {
				p.Notes = append(p.Notes, fmt.Sprintf("trunk budget %s is below one ring slot (%s): running at the minimum", units.Bytes(in.TrunkBudget), units.Bytes(slot)))
			} else if p.RingSlots < ring {
				p.Notes = append(p.Notes, fmt.Sprintf("trunk budget holds %d ring slot(s), not %d", p.RingSlots, ring))
			}
		}
		p.RingBytes = int64(p.RingSlots) * p.SlotBytes
	}
	if in.ExpertBytes > 0 {
		p.CacheSlots = int(in.CacheBudget / in.ExpertBytes)
		if in.MaxExperts > 0 && p.CacheSlots > in.MaxExperts {
			p.CacheSlots = in.MaxExperts
		}
		if minSlots := in.TopK + 1; p.CacheSlots < minSlots {
			p.Notes = append(p.Notes, fmt.Sprintf("expert cache budget %s is below the minimum of %d experts: running at the minimum", units.Bytes(in.CacheBudget), minSlots))
			p.CacheSlots = minSlots
		}
		p.CacheBytes = int64(p.CacheSlots) * in.ExpertBytes
	}
	p.Total = p.Baseline + p.PinnedBytes + p.RingBytes + p.CacheBytes + p.Globals + p.State + p.KV + p.Buffers
	return p
}

// fits is the one test of a plan's total against memory: at most 95% of
// the usable memory.
func fits(total int64, mem Memory) bool { return float64(total) <= 0.95*float64(mem.Usable()) }

// Check refuses a plan that needs more than 95% of the usable memory.
func (p *Plan) Check(mem Memory) error {
	usable := mem.Usable()
	if usable <= 0 {
		return nil // unknown: nothing to check against
	}
	if !fits(p.Total, mem) {
		return fmt.Errorf("the memory plan needs %s but only %s is available (95%% of %s); lower --trunk-gb/--cache-gb, pick a smaller --preset, or shorten the context (the KV cache takes %s)",
			units.Bytes(p.Total), units.Bytes(int64(0.95*float64(usable))), units.Bytes(usable), units.Bytes(p.KV))
	}
	return nil
}

// String renders the plan, one line per part.
func (p *Plan) String() string {
	var b strings.Builder
	pinned := 0
	for _, x := range p.Pinned {
		if x {
			pinned++
		}
	}
	fmt.Fprintf(&b, "memory plan:\n")
	fmt.Fprintf(&b, "  trunk pinned   %10s  (%d of %d layers)\n", units.Bytes(p.PinnedBytes), pinned, len(p.Pinned))
	if p.RingSlots > 0 {
		fmt.Fprintf(&b, "  trunk ring     %10s  (%d slot(s) of %s)\n", units.Bytes(p.RingBytes), p.RingSlots, units.Bytes(p.SlotBytes))
	}
	fmt.Fprintf(&b, "  model tables   %10s  (embeddings, lm_head, final norms)\n", units.Bytes(p.Globals))
	fmt.Fprintf(&b, "  expert cache   %10s  (%d slots)\n", units.Bytes(p.CacheBytes), p.CacheSlots)
	fmt.Fprintf(&b, "  KDA state      %10s\n", units.Bytes(p.State))
	fmt.Fprintf(&b, "  MLA KV cache   %10s\n", units.Bytes(p.KV))
	fmt.Fprintf(&b, "  buffers        %10s\n", units.Bytes(p.Buffers))
	fmt.Fprintf(&b, "  process base   %10s\n", units.Bytes(p.Baseline))
	fmt.Fprintf(&b, "  total          %10s\n", units.Bytes(p.Total))
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
