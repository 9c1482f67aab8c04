package engine

import "math"

// PassCosts model a decode pass of T positions on one machine at one
// budget: the streamed trunk and tables are read once per pass, each
// position's expert misses once per position, and reads overlap compute
// as well as measured.
type PassCosts struct {
	TrunkBytes  float64   // streamed trunk and table bytes per pass
	ExpertBytes float64   // expert bytes read per position
	DiskBps     float64   // read speed, bytes per second
	Compute     []float64 // compute seconds of a pass of T positions at index T (index 0 unused)
	Overlap     float64   // measured overlap efficiency, max(read, compute) / wall (0: perfect)
}

// Bytes read by a pass of T positions.
func (c PassCosts) Bytes(T int) float64 { return c.TrunkBytes + float64(T)*c.ExpertBytes }

// Seconds of a pass of T positions: max(read, compute) over the overlap
// efficiency.
func (c PassCosts) Seconds(T int) float64 {
	comp := c.Compute[min(T, len(c.Compute)-1)]
	s := math.Max(c.Bytes(T)/c.DiskBps, comp)
	if c.Overlap > 0 {
		s /= c.Overlap
	}
	return s
}

// SpecSim is speculative decoding simulated over a known continuation.
type SpecSim struct {
	Tokens   int // generated tokens (the first comes from the prompt's pass)
	Passes   int // decode passes after the prompt
	Drafted  int
	Accepted int
	Bytes    float64 // read by the decode passes
	Seconds  float64 // the decode passes' modelled time
	Lengths  []int   // passes by draft length
}

// SecondsPerToken and BytesPerToken are per token after the first.
func (s SpecSim) SecondsPerToken() float64 { return s.Seconds / float64(max(s.Tokens-1, 1)) }

// BytesPerToken is the bytes read per token after the first.
func (s SpecSim) BytesPerToken() float64 { return s.Bytes / float64(max(s.Tokens-1, 1)) }

// AcceptedPerPass is the mean accepted drafts per decode pass.
func (s SpecSim) AcceptedPerPass() float64 { return float64(s.Accepted) / float64(max(s.Passes, 1)) }

// simOfPasses is what tokens generated in passes would read and take at
// costs (GenResult.SpecSim).
func simOfPasses(tokens int, passes []Pass, maxDraft int, costs PassCosts) SpecSim {
	sim := SpecSim{Tokens: tokens, Passes: len(passes), Lengths: make([]int, maxDraft+1)}
	for _, p := range passes {
		sim.Lengths[min(p.Drafted, maxDraft)]++
		sim.Drafted += p.Drafted
		sim.Accepted += p.Accepted
		sim.Bytes += costs.Bytes(p.Drafted + 1)
		sim.Seconds += costs.Seconds(p.Drafted + 1)
	}
	return sim
}

// SimulateSpec runs the decode loop's drafting over ids as if the model
// chose exactly ids[start:] (greedy decoding of a model whose reply is that
// text): every pass drafts from the tokens so far with the engine's drafter,
// accepts the drafts that equal the next ids, and costs what costs say.
// mode is SpecOff, a forced length, or SpecAuto (the engine's controller,
// with costs as its cost model and the acceptance measured as it goes).
func SimulateSpec(ids []int, start int, mode Spec, maxDraft int, costs PassCosts) SpecSim {
	var ctl *specControl
	if mode != SpecOff {
		ctl = newSpecControl(maxDraft, costs.Seconds)
		if mode > 0 {
			ctl.max, ctl.forced = min(maxDraft, int(mode)), true
		}
	}
	ctl.start(ids[:start])
	return simulatePasses(ids, start, maxDraft, costs, func(pos int) []int {
		ctl.observeToken(ids[:pos+1])
		return ctl.draft(ids[:pos+1], len(ids)-1-pos)
	}, func(pos, acc int) {
		for i := 1; i <= acc; i++ {
			ctl.observeToken(ids[:pos+i+1])
		}
	})
}

// SpecCeiling is what the engine's drafter could give over a known
// continuation if every draft stopped exactly where it would first fail (a
// controller that knows the future): each pass proposes up to maxDraft
// tokens as SimulateSpec's drafter does and keeps only those that come
// true, so nothing drafted is wasted. A controller choosing draft lengths
// for this drafter can only waste more (its passes may start elsewhere, so
// this is the ceiling of stopping well, not a strict bound).
func SpecCeiling(ids []int, start, maxDraft int, costs PassCosts) SpecSim {
	return simulatePasses(ids, start, maxDraft, costs, func(pos int) []int {
		d := proposeDraft(ids[:pos+1], min(maxDraft, len(ids)-1-pos-1))
		return d[:comeTrue(d, ids[pos+1:])]
	}, func(int, int) {})
}

// simulatePasses runs decode passes over ids from start as if the model
// chose exactly ids[start:]: the pass at pos feeds ids[pos] with the draft
// draftAt(pos), accepts the drafts that equal the next ids (then told to
// kept) and costs what costs say.
func simulatePasses(ids []int, start, maxDraft int, costs PassCosts, draftAt func(pos int) []int, kept func(pos, acc int)) SpecSim {
	sim := SpecSim{Tokens: len(ids) - start, Lengths: make([]int, maxDraft+1)}
	for pos := start; pos < len(ids)-1; {
		draft := draftAt(pos)
		acc := comeTrue(draft, ids[pos+1:])
		T := len(draft) + 1
		sim.Passes++
		sim.Lengths[len(draft)]++
		sim.Drafted += len(draft)
		sim.Accepted += acc
		sim.Bytes += costs.Bytes(T)
		sim.Seconds += costs.Seconds(T)
		kept(pos, acc)
		pos += acc + 1
	}
	return sim
}

// comeTrue is how many leading tokens of draft equal next.
func comeTrue(draft, next []int) int {
	n := 0
	for n < len(draft) && n < len(next) && draft[n] == next[n] {
		n++
	}
	return n
}
