package plan

import (
	"fmt"

	"k3/storage/config"
	"k3/storage/units"
)

// ContextStep is how far a context grows at a time (Grow), so that it is
// not planned again at every turn or request.
const ContextStep = 4096

// Growth is a context planned for more positions than the plan reserved
// when the model was opened: the KV cache rows they add.
type Growth struct {
	Planned, Need int   // positions reserved before, and now (a multiple of ContextStep)
	PerPos        int64 // KV cache bytes one position takes (with the state copies)
	More          int64 // what the positions added take
}

// Grow plans a context that reaches need positions (need rounded up to
// ContextStep) beyond the planned ones, for layers of the model c with
// stateCopies state copies kept. The rows it adds must fit 95% of the
// memory usable now (mem, which no longer counts what the model already
// holds; nil: unknown, not checked): else an error names the positions,
// their bytes and what is available. need within planned: no growth.
func Grow(c *config.Config, layers, stateCopies, planned, need int, mem *Memory) (Growth, error) {
	g := Growth{Planned: planned, Need: planned}
	if need <= planned {
		return g, nil
	}
	g.Need = (need + ContextStep - 1) / ContextStep * ContextStep
	g.PerPos = ForModel(c, layers, Sizes{}, Run{StateCopies: stateCopies}).KVPerPos
	g.More = g.PerPos * int64(g.Need-planned)
	if mem != nil && mem.Usable() > 0 && float64(g.More) > 0.95*float64(mem.Usable()) {
		return g, fmt.Errorf("a context of %d positions needs %s more KV cache than the %d positions planned, but only %s of memory is available",
			g.Need, units.Bytes(g.More), planned, units.Bytes(mem.Usable()))
	}
	return g, nil
}
