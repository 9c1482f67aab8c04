package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k3/storage/units"
)

// Inputs are the sizes a memory plan adds up. Byte sizes come from the
// checkpoint (or the packed trunk); budgets from flags or a preset.
type Inputs struct {
	LayerBytes  []int64 // trunk bytes of each bound layer, as stored
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
	// SpecPositions is the most positions a speculative verification pass
	// feeds (the draft plus the token before it; 0: no speculation), and
	// SpecRecordPerPos the rollback record one of them takes (see Plan.Spec).
	SpecPositions    int
	SpecRecordPerPos int64
	// DraftBytes are a draft model's weights (resident) and DraftPerPos
	// its context rows per position (0: no draft model); DraftStream and
	// DraftRead what it keeps and reads per drafting cycle streamed, and
	// DraftStreamed whether it is (Plan.DraftStreamed).
	DraftBytes, DraftPerPos, DraftStream, DraftRead int64
	DraftStreamed                                   bool
	// LogicalLayerBytes are the layers' bf16 sizes when a compressed trunk
	// stores them smaller (nil or equal: nothing compressed); see Make.
	LogicalLayerBytes []int64
	// MappedPage is the page the buffers the engine maps outside the Go
	// heap are resident in (HugePage; 0: count their bytes as they are), and
	// TableRuns how many of those buffers the model tables take (a packed
	// trunk's embedding, lm_head and final-norm runs). See Plan.Pages.
	MappedPage int64
	TableRuns  int
	// Chunk is the prefill chunk (positions per pass) and Prefill what a
	// chunk of them takes (PrefillFor); ChunkWhy says how it was chosen.
	Chunk    int
	Prefill  PrefillCost
	ChunkWhy string
	// Vision is the vision tower's part (VisionFor; zero: no tower).
	Vision VisionCost
	// EmbedStreamed: the embedding rows are read from the packed trunk
	// when needed, lm_head stays resident (StreamsEmbedding); GlobalBytes
	// leaves the embedding out.
	EmbedStreamed bool
}

// HugePage is the granularity of the buffers the engine maps outside the
// Go heap (direct.AllocHuge): 2 MiB, advised as transparent huge pages, so
// a buffer is resident in whole huge pages once touched.
const HugePage = 2 << 20

// Plan is the decided memory layout.
type Plan struct {
	Pinned      []bool // per layer: held in RAM for the whole run
	PinnedBytes int64
	RingSlots   int   // streamed layers in flight (the one computing and those read ahead)
	SlotBytes   int64 // the largest streamed layer: the smallest ring
	RingBytes   int64 // the ring the streamed layers are read into
	CacheSlots  int
	CacheBytes  int64
	Globals     int64
	State       int64
	KV          int64
	// KVPositions are the positions KV counts: the context and a
	// verification pass's drafts (the engine allocates the MLA cache's
	// rows for them, engine.mlaCache.grow).
	KVPositions int
	Buffers     int64
	Baseline    int64
	// Spec is the rollback record of speculative decoding. A verification
	// pass feeds a drafted token run through every layer; the drafts after
	// the first rejected one must then be undone. The MLA latent cache is
	// cut back. A KDA layer's recurrent state cannot be cut back, and a
	// copy of it per position would take the whole KDA state (0.46 GB at
	// the released size) per drafted token, so instead each layer records,
	// per position of the pass, what its recurrence consumed: the raw q, k,
	// v (the short convolutions' history) and the normalised k, v, the
	// decay and beta, 6*heads*head_dim + heads floats. The pass runs each
	// KDA layer on one layer's scratch copy of its state (counted in
	// State), so the state stays as it was; rewinding replays the kept
	// positions' delta-rule updates into it: compute only, no weight
	// read, bit for bit the state of feeding those positions alone. At the
	// memory floor a plain pass of one position is recorded the same way
	// instead of copying the whole state. At the released size (69 KDA layers
	// of 96 heads of 128) that is 20.4 MB per position, 183 MB for a
	// 9-position pass (8 drafts).
	Spec int64
	// Draft is the draft model: its weights, and its context rows for
	// every position (its embedding and lm_head are the model's).
	// DraftStreamed: of its weights only the norms and the kv_a
	// projections are held, with a buffer of its largest matrix; every
	// other matrix is read from its file, with direct I/O, each time a
	// drafting cycle uses it, DraftRead bytes per cycle (docs/DSPARK.md
	// §6.1). The engine streams it when it does not fit resident beside
	// the rest of the plan (DraftPlacement).
	Draft         int64
	DraftStreamed bool
	DraftRead     int64
	Total         int64
	Notes         []string
	// Compressed: the trunk stores the layers compressed (BF16C). Expanded:
	// the pinned layers are decoded to bf16 once, at load, and held so
	// (PinnedBytes counts their bf16 sizes); otherwise pinned and streamed
	// layers stay compressed. See Make.
	Compressed, Expanded bool
	// Load is the buffer an expanded layer is read into before it is
	// decoded, the largest stored layer, freed at once: only while the
	// model loads, so Total counts it only where it exceeds the parts
	// allocated after loading (0 unless Expanded).
	Load int64
	// Pages is what the mapped buffers take beyond their bytes, each
	// rounded up to whole MappedPage pages: from a packed trunk each pinned
	// layer, each table run and the ring, and the expert cache's arena.
	// Nothing at the released size (a few hundred MB at most), but at the
	// demo's size (seven runs of 0.1-0.6 MB, 16 MB resident in 2 MiB pages)
	// it is most of what is mapped.
	Pages       int64
	PagedBuffer int // how many buffers Pages rounds
	// Chunk is the prefill chunk, positions per pass, and Prefill the
	// memory a pass over one takes (activations, MoE gather buffers,
	// attention score rows); ChunkWhy says how it was chosen (FitChunk).
	Chunk    int
	Prefill  int64
	ChunkWhy string
	// Tower is the vision tower's weights: held for the whole run when
	// resident, else (TowerStreamed) the part a picture's run holds (the
	// tables, the projector and one layer), loaded for the picture and
	// released. Picture is the working memory of the largest picture
	// planned (its activations and its rows until they are read); a
	// picture runs before its prompt is read, so it shares the prompt
	// reading's share: the plan counts the larger of the two (with the
	// streamed tower on the picture's side). See VisionFor.
	Tower         int64
	TowerStreamed bool
	Picture       int64
	PicturePos    int
	// PictureKept is, at the floor, the rows of the pictures fed before
	// the one the tower looks at (VisionCost.Kept), counted with it.
	PictureKept int64
	// EmbedStreamed: the embedding rows are read from the packed trunk
	// when a token needs them (Inputs.EmbedStreamed).
	EmbedStreamed bool
}

// Make decides what to pin and how many slots to use. Layers are pinned
// largest first while they fit in the trunk budget left after the ring;
// when everything fits, everything is pinned and no ring is kept. Budgets
// below the minimum working set (one ring slot; MinExpertSlots expert
// slots) run at that minimum, with a note.
//
// A compressed trunk (LogicalLayerBytes not LayerBytes) is planned by
// which of BF16C's two effects pays. A layer held in RAM is read by
// compute-bound mat-vecs, which run slower on BF16C than on bf16 (the
// decode is the limit); a layer read from disk is disk-bound, and BF16C
// reads fewer bytes. So when the whole trunk fits the budget at its bf16
// size, every layer is pinned and expanded to bf16 at load (no ring,
// PinnedBytes the bf16 sizes); otherwise the layers stay compressed,
// pinned and streamed, so that more of them pin in the budget and each
// streamed one reads fewer bytes (docs/BENCHMARKS.md has the numbers).
func Make(in Inputs) *Plan {
	kvPositions := in.Positions
	if in.Positions > 0 && in.SpecPositions > 1 {
		kvPositions += in.SpecPositions - 1 // a pass's drafts sit in the cache until they are verified
	}
	p := &Plan{Pinned: make([]bool, len(in.LayerBytes)), Globals: in.GlobalBytes, State: in.StateBytes,
		KV: in.KVPerPos * int64(kvPositions), KVPositions: kvPositions, Buffers: in.BufferBytes, Baseline: in.BaselineRSS,
		Spec: int64(in.SpecPositions) * in.SpecRecordPerPos, Chunk: in.Chunk, ChunkWhy: in.ChunkWhy, EmbedStreamed: in.EmbedStreamed}
	if in.Positions > 0 && p.Chunk > in.Positions {
		p.Chunk = in.Positions // a pass never holds more positions than the context
	}
	p.Prefill = in.Prefill.Bytes(p.Chunk)
	p.draft(in, kvPositions)
	all, logical := p.pinTrunk(in)
	p.compressionNote(all, logical)
	p.expertCache(in)
	// an expanding load holds one layer as read next to the layers
	// expanded so far, before any of the parts after the tables is
	// allocated (the engine's buffers, the state, the expert cache's
	// slots): the peak is the larger of the two
	p.pages(in)
	p.Tower, p.TowerStreamed, p.Picture, p.PicturePos, p.PictureKept = in.Vision.Bytes, in.Vision.Streamed, in.Vision.Work, in.Vision.Positions, in.Vision.Kept
	after := p.RingBytes + p.CacheBytes + p.State + p.KV + p.Buffers + p.transient() + p.residentTower() + p.Spec + p.Draft
	p.Total = p.Baseline + p.PinnedBytes + p.Globals + p.Pages + max(after, p.Load)
	return p
}

// pinTrunk decides which trunk layers are pinned (all of them when the
// trunk fits the budget, at its bf16 size when a compressed trunk fits
// expanded) and sizes the ring of the streamed ones; all and logical are
// the trunk's stored and bf16 sizes.
func (p *Plan) pinTrunk(in Inputs) (all, logical int64) {
	for i, b := range in.LayerBytes {
		all += b
		l := b
		if in.LogicalLayerBytes != nil {
			l = in.LogicalLayerBytes[i]
		}
		logical += l
		p.Compressed = p.Compressed || (in.Streaming && l != b)
	}
	if p.Compressed && logical <= in.TrunkBudget {
		for i := range p.Pinned {
			p.Pinned[i] = true
		}
		p.PinnedBytes, p.Expanded, p.Load = logical, true, slices.Max(in.LayerBytes)
		p.Notes = append(p.Notes, fmt.Sprintf("the whole trunk fits the budget at its bf16 size (%s, %s compressed): every layer is pinned, expanded to bf16 at load, as bf16 mat-vecs in RAM are faster than compressed ones",
			units.Bytes(logical), units.Bytes(all)))
	} else if !in.Streaming || all <= in.TrunkBudget {
		for i := range p.Pinned {
			p.Pinned[i] = true
		}
		p.PinnedBytes = all
		if in.Streaming && all <= in.TrunkBudget {
			p.Notes = append(p.Notes, "the whole trunk fits the budget: every layer is pinned")
		}
	} else {
		p.pinAndRing(in)
	}
	return all, logical
}

// pinAndRing pins the largest layers that fit beside a ring for the
// streamed ones and sizes that ring.
func (p *Plan) pinAndRing(in Inputs) {
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
	// the ring is one buffer the streamed layers are read into one
	// after another, each where the last one ended: it takes what the
	// budget leaves, between one largest layer and `ring` of them, and
	// holds as many layers in flight as fit (at most ring). So a
	// budget that cannot hold two of the largest layer (the dense
	// layer 0 is twice a typical one) still reads the next typical
	// layer while one computes.
	var streamed []int64
	for i, b := range in.LayerBytes {
		if !p.Pinned[i] {
			streamed = append(streamed, b)
		}
	}
	slot := in.LayerBytes[order[k]]
	p.SlotBytes = slot
	p.RingBytes = min(int64(ring)*slot, max(in.TrunkBudget-p.PinnedBytes, slot))
	var fitting int
	p.RingSlots, fitting = ringSlots(streamed, p.RingBytes, ring)
	if p.RingSlots > 1 {
		// no more than what it holds: the largest layer, or the largest
		// run of layers in flight that fits, whichever is larger
		p.RingBytes = max(min(slot+RingSlack, p.RingBytes), inFlightBytes(streamed, p.RingBytes, p.RingSlots))
	}
	switch {
	case in.TrunkBudget-p.PinnedBytes < slot:
		p.Notes = append(p.Notes, fmt.Sprintf("trunk budget %s is below one ring slot (%s): running at the minimum", units.Bytes(in.TrunkBudget), units.Bytes(slot)))
	case p.RingSlots < ring:
		p.Notes = append(p.Notes, fmt.Sprintf("trunk budget holds %d layer(s) in flight, not %d", p.RingSlots, ring))
	}
	if fitting < len(streamed) {
		p.Notes = append(p.Notes, fmt.Sprintf("the %s trunk ring holds %d layers in flight at %d of the %d streamed layers, fewer at the others (the largest is %s)",
			units.Bytes(p.RingBytes), p.RingSlots, fitting, len(streamed), units.Bytes(slot)))
	}
}

// compressionNote says how a compressed trunk is held when it is not
// expanded to bf16.
func (p *Plan) compressionNote(all, logical int64) {
	switch {
	case p.Compressed && !p.Expanded && p.RingSlots == 0:
		p.Notes = append(p.Notes, fmt.Sprintf("the trunk does not fit the budget at its bf16 size (%s): every layer is pinned compressed (BF16C, %s)",
			units.Bytes(logical), units.Bytes(all)))
	case p.Compressed && !p.Expanded:
		p.Notes = append(p.Notes, fmt.Sprintf("the trunk does not fit the budget at its bf16 size (%s): its layers stay compressed (BF16C, %s), so more of them pin and each streamed one reads fewer bytes",
			units.Bytes(logical), units.Bytes(all)))
	}
}

// ExpertQueueDepth is how many routed-expert reads the expert store keeps
// in flight at once (engine.ExpertStore): enough to keep an NVMe queue
// busy, and the reads one layer's decode step needs at K3's top-k of 16
// are two rounds of it.
const ExpertQueueDepth = 8

// MinExpertSlots is the smallest expert cache, in slots, for a model that
// routes each token to topK experts: the reads in flight (a layer's top-k,
// at most ExpertQueueDepth of them at once) plus the one expert computing.
// The engine runs a layer's experts through the cache a slot at a time
// (ExpertStore.Each: a slot is reused as soon as its expert has been used,
// and each expert writes only its own rows, summed in slot order), so any
// size gives the same output; a smaller one would leave the disk's queue
// short while an expert computes. At K3 (top-k 16) that is 9 slots, 0.16 GB;
// the C engine's rule, top-k + 1 (17, 0.30 GB), pinned a layer's top-k at
// once. The engine, the plan and k3 sim-cache use this one rule.
func MinExpertSlots(topK int) int { return min(max(topK, 1), ExpertQueueDepth) + 1 }

// expertCache sizes the expert cache: its budget in slots, at most the
// experts there are, at least MinExpertSlots.
func (p *Plan) expertCache(in Inputs) {
	if in.ExpertBytes > 0 {
		p.CacheSlots = int(in.CacheBudget / in.ExpertBytes)
		if in.MaxExperts > 0 && p.CacheSlots > in.MaxExperts {
			p.CacheSlots = in.MaxExperts
		}
		if minSlots := MinExpertSlots(in.TopK); p.CacheSlots < minSlots {
			p.Notes = append(p.Notes, fmt.Sprintf("expert cache budget %s is below the minimum of %d experts (%s): raised to %s (%d slots), counted in this plan",
				units.Bytes(in.CacheBudget), minSlots, minSlotsWhy(in.TopK), units.Bytes(int64(minSlots)*in.ExpertBytes), minSlots))
			p.CacheSlots = minSlots
		}
		p.CacheBytes = int64(p.CacheSlots) * in.ExpertBytes
	}
}

// minSlotsWhy says where MinExpertSlots(topK) comes from, for the note.
func minSlotsWhy(topK int) string {
	if topK <= ExpertQueueDepth {
		return fmt.Sprintf("top-k %d + 1", topK)
	}
	return fmt.Sprintf("%d reads in flight + 1", ExpertQueueDepth)
}

// draft counts the draft model (Plan.Draft), its context rows for
// positions.
func (p *Plan) draft(in Inputs, positions int) {
	if in.DraftBytes <= 0 {
		return
	}
	w := in.DraftBytes
	if in.DraftStreamed && in.DraftStream > 0 {
		w, p.DraftStreamed, p.DraftRead = in.DraftStream, true, in.DraftRead
	}
	p.Draft = w + in.DraftPerPos*int64(positions)
}

// pages counts what rounding the mapped buffers up to whole pages adds
// (Plan.Pages). The engine maps, from a packed trunk, one buffer per pinned
// layer (at its bf16 size when expanded), one per table run and the ring;
// and with or without one, the expert cache's arena. The tables' runs are
// counted together, rounded up, and one page more for each run after the
// first: never less than their own rounding.
func (p *Plan) pages(in Inputs) {
	pg := in.MappedPage
	if pg <= 0 {
		return
	}
	round := func(b int64) {
		if b > 0 {
			p.Pages += (b+pg-1)/pg*pg - b
			p.PagedBuffer++
		}
	}
	if in.Streaming {
		for i, pinned := range p.Pinned {
			if !pinned {
				continue
			}
			b := in.LayerBytes[i]
			if p.Expanded && in.LogicalLayerBytes != nil {
				b = in.LogicalLayerBytes[i]
			}
			round(b)
		}
		if in.TableRuns > 0 && p.Globals > 0 {
			round(p.Globals)
			p.Pages += int64(in.TableRuns-1) * pg
			p.PagedBuffer += in.TableRuns - 1
		}
		round(p.RingBytes)
	}
	round(p.CacheBytes)
}

// fits is the one test of a plan's total against memory: at most 95% of
// the usable memory.
func fits(total int64, mem Memory) bool { return float64(total) <= 0.95*float64(mem.Usable()) }

// ringSlots is the most streamed layers a ring of ringBytes holds in
// flight (at most ring, at least 1), counting each layer with the ones
// after it in decode order, and for how many of the streamed layers that
// many fit.
func ringSlots(streamed []int64, ringBytes int64, ring int) (slots, fitting int) {
	n := len(streamed)
	for slots = ring; slots > 1; slots-- {
		fitting = 0
		for i := range streamed {
			var sum int64
			for j := 0; j < slots; j++ {
				sum += streamed[(i+j)%n]
			}
			if sum <= ringBytes {
				fitting++
			}
		}
		if fitting > 0 {
			return slots, fitting
		}
	}
	return 1, n
}

// RingSlack is what a ring needs beyond a layer's bytes to hold it: a
// layer is read in two parts (its attention and its MLP), each rounded out
// to whole direct-I/O blocks (4 KiB), so they overlap by up to one block,
// and the ring itself is cut down to a whole block.
const RingSlack = 2 * 4096

// inFlightBytes is the largest run of up to slots consecutive streamed
// layers (in decode order, cyclically) that fits in ringBytes, with
// RingSlack a layer (never above ringBytes): what a ring needs to hold in
// flight every run that one of ringBytes holds (ringSlots counts the same
// runs for either), so it reads ahead at the same layers.
func inFlightBytes(streamed []int64, ringBytes int64, slots int) int64 {
	var most int64
	n := len(streamed)
	for i := range streamed {
		var sum int64
		for j := 0; j < min(slots, n); j++ {
			sum += streamed[(i+j)%n]
			if sum > ringBytes {
				break
			}
			most = max(most, min(sum+int64(j+1)*RingSlack, ringBytes))
		}
	}
	return most
}

// Check refuses a plan that needs more than 95% of the usable memory.
func (p *Plan) Check(mem Memory) error {
	usable := mem.Usable()
	if usable <= 0 {
		return nil // unknown: nothing to check against
	}
	if !fits(p.Total, mem) && p.Draft > 0 {
		// name the drafter's share: the run fits, or needs a smaller plan, without it
		without := "also without it the plan needs " + units.Bytes(p.Total-p.Draft) + ", more than fits: pick a smaller --preset"
		if fits(p.Total-p.Draft, mem) {
			without = "without --draft the plan needs " + units.Bytes(p.Total-p.Draft) + ", which fits"
		}
		how := "resident"
		if p.DraftStreamed {
			how = "streamed: its small tensors and the buffer its matrices are read into"
		}
		return fmt.Errorf("the memory plan needs %s with the draft model (%s of it: its weights and context rows, %s) but only %s is available (95%% of %s); %s",
			units.Bytes(p.Total), units.Bytes(p.Draft), how, units.Bytes(int64(0.95*float64(usable))), units.Bytes(usable), without)
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
	form := ""
	switch {
	case p.Expanded:
		form = ", expanded to bf16 for speed"
	case p.Compressed && pinned > 0:
		form = ", compressed"
	}
	fmt.Fprintf(&b, "  trunk pinned   %10s  (%d of %d layers%s)\n", units.Bytes(p.PinnedBytes), pinned, len(p.Pinned), form)
	if p.RingSlots > 0 {
		form = ""
		if p.Compressed {
			form = "; compressed"
		}
		fmt.Fprintf(&b, "  trunk ring     %10s  (%d layer(s) in flight; largest %s%s)\n", units.Bytes(p.RingBytes), p.RingSlots, units.Bytes(p.SlotBytes), form)
	}
	if p.Load > 0 {
		fmt.Fprintf(&b, "  load buffer    %10s  (a compressed layer as read, until it is expanded; only while loading)\n", units.Bytes(p.Load))
	}
	tables := "embeddings, lm_head, final norms"
	if p.EmbedStreamed {
		tables = "lm_head, final norms; embedding rows read when needed"
	}
	fmt.Fprintf(&b, "  model tables   %10s  (%s)\n", units.Bytes(p.Globals), tables)
	fmt.Fprintf(&b, "  expert cache   %10s  (%d slots)\n", units.Bytes(p.CacheBytes), p.CacheSlots)
	fmt.Fprintf(&b, "  KDA state      %10s\n", units.Bytes(p.State))
	fmt.Fprintf(&b, "  MLA KV cache   %10s\n", units.Bytes(p.KV))
	fmt.Fprintf(&b, "  buffers        %10s\n", units.Bytes(p.Buffers))
	b.WriteString(p.prefillLine())
	b.WriteString(p.visionLines())
	if p.Spec > 0 {
		fmt.Fprintf(&b, "  spec rollback  %10s  (recurrence inputs of a verification pass)\n", units.Bytes(p.Spec))
	}
	if p.Draft > 0 {
		if p.DraftStreamed {
			fmt.Fprintf(&b, "  draft model    %10s  (streamed: %s read per drafting cycle; kept: norms, context and kv_a projections, a buffer of its largest matrix, context rows)\n", units.Bytes(p.Draft), units.Bytes(p.DraftRead))
		} else {
			fmt.Fprintf(&b, "  draft model    %10s  (resident: weights and context rows)\n", units.Bytes(p.Draft))
		}
	}
	if p.Pages > 0 {
		fmt.Fprintf(&b, "  whole pages    %10s  (%d buffers mapped in %s pages)\n", units.Bytes(p.Pages), p.PagedBuffer, units.Bytes(HugePage))
	}
	fmt.Fprintf(&b, "  process base   %10s\n", units.Bytes(p.Baseline))
	fmt.Fprintf(&b, "  total          %10s\n", units.Bytes(p.Total))
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}
