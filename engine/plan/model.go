package plan

import "k3/storage/config"

// ContextPositions is the context a conversation is planned for before it
// grows: 4096 positions, prompt and reply (a new k3 chat at its
// 4096-token turn cap). The doctor plans it (doctor.PlanPositions: what
// "auto" fits into memory and k3 presets prints), and the app opens its
// model with it (bridge.Settings.Positions), so the preset the doctor
// recommends is the plan the app opens. 55 KB a position at K3 size.
const ContextPositions = 4096

// DefaultMaxDraft is the longest speculative draft a verification pass runs
// unless a run says otherwise; plans reserve its rollback record.
const DefaultMaxDraft = 8

// HeadChunkBytes is the lm_head buffer of ultra-low-memory mode: two
// chunks of rows, one read while the other is applied.
const HeadChunkBytes = 16 << 20

// Sizes are a model's bytes as the plan adds them up: from a checkpoint's
// metadata (the engine) or from a config alone (the doctor).
type Sizes struct {
	LayerBytes  []int64 // trunk bytes of each bound layer (routed experts excluded), as stored
	GlobalBytes int64   // embeddings, lm_head, final norms
	TableBytes  int64   // embedding + lm_head: what ultra mode leaves on disk
	// EmbedBytes is the embedding alone when lm_head is a tensor of its
	// own (0 when tied): what the floor leaves on disk (StreamsEmbedding).
	EmbedBytes int64
	SlotBytes  int64 // one routed-expert cache slot
	// LogicalLayerBytes are the layers' bf16 (checkpoint) sizes when a
	// compressed trunk stores them smaller (nil: LayerBytes).
	LogicalLayerBytes []int64
	// Vision is the vision tower's sizes (zero: the model has none).
	Vision VisionSizes
}

// Run is what a run asks of memory besides the model's sizes.
type Run struct {
	Streaming   bool  // a packed trunk: layers may be streamed
	TrunkBudget int64 // pinned layers + ring
	Ring        int
	CacheBudget int64
	Ultra       bool
	Positions   int // context: resumed + prompt + generated
	Chunk       int // prefill chunk
	// Workers are the threads computing attention rows at once (0: one).
	Workers   int
	AllLogits bool // logits kept for every position (teacher forcing)
	// SpecPositions is the most positions a speculative verification pass
	// runs (the longest draft plus one; 0: no speculation).
	SpecPositions int
	// StateCopies is how many whole copies of the run state (KDA state and
	// MLA cache) the caller keeps beside the live one: a chat session's
	// snapshot for regenerating and its edit checkpoints.
	StateCopies int
	BaselineRSS int64
	// DraftBytes are a draft model's weights and DraftPerPos its context
	// rows per position (0: none). DraftStream is what it keeps streamed
	// (its small tensors and the buffer its matrices are read into) and
	// DraftRead what it reads per drafting cycle then; DraftStreamed:
	// streamed (see Plan.DraftStreamed).
	DraftBytes, DraftPerPos, DraftStream, DraftRead int64
	DraftStreamed                                   bool
	// Floor: the run is at the memory floor (Floor): it keeps no copy of
	// the whole KDA state. A pass of up to SpecPositions positions (at
	// least one) is recorded instead, run on one layer's scratch state and
	// replayed; a longer one (a prefill chunk) stopped part-way is
	// dropped and read again at the next feed (no memory either way).
	Floor bool
	// Picture is the largest picture planned, in prompt positions (0:
	// none; at most Positions): see VisionFor.
	Picture int
}

// Floor reports whether a streamed run at this trunk budget is at the
// memory floor (ultra, or a trunk budget no larger than laptop's): it
// keeps no copy of the state, neither the rollback copy (Run.Floor) nor a
// chat session's (ChatCopies).
func Floor(trunkBytes int64, ultra bool) bool {
	laptop, _ := Lookup("laptop")
	return ultra || (trunkBytes > 0 && trunkBytes <= int64(laptop.TrunkGB*GB))
}

// FloorFor is Floor for a model whose streamed layers take trunkBytes
// (0: not known): a budget that holds the whole trunk streams nothing, so
// a small model (the demo, 1.4 MB of layers) is not at the floor at
// laptop's budget; it plans the state copies and the rollback copy that
// it needs and has room for, as above the floor. Ultra is always at the
// floor.
func FloorFor(trunkBudget, trunkBytes int64, ultra bool) bool {
	return ultra || (Floor(trunkBudget, false) && (trunkBytes <= 0 || trunkBudget < trunkBytes))
}

// KDARecordBytes is what speculative decoding records per position and KDA
// layer to replay the recurrence of the accepted positions without
// re-reading weights: raw q, k, v, the normalised k, v, the decay (each
// heads x headDim floats) and beta (one per head).
func KDARecordBytes(heads, headDim int) int64 { return int64(6*heads*headDim+heads) * 4 }

// ForModel are the plan inputs of a run of the first `layers` layers of a
// model with config c: the KDA state (twice, unless at the floor: a
// cancellable forward keeps a copy from before its chunk to roll back to)
// and one layer's scratch state (a verification pass runs on it, leaving
// the state as it was, and replays what it kept), the MLA latent cache
// per position, the activations of one prefill chunk, the logits,
// speculation's per-position record, and the state copies the caller
// keeps (Run.StateCopies: each holds the KDA state and at most the whole
// MLA cache).
func ForModel(c *config.Config, layers int, s Sizes, r Run) Inputs {
	P := int64(c.KDAHeads * c.KDAHeadDim)
	var state, kvPerPos, record, scratch int64
	for i := 0; i < layers; i++ {
		if c.IsMLA(i) {
			kvPerPos += int64(c.KVLoraRank+c.QKRope) * 4
		} else {
			scratch = (P*int64(c.KDAHeadDim) + 3*P*int64(c.ConvK-1)) * 4
			state += scratch
			record += KDARecordBytes(c.KDAHeads, c.KDAHeadDim)
		}
	}
	copies := max(r.StateCopies, 0)
	backup := int64(1)
	recorded := r.SpecPositions
	if r.Floor {
		backup, recorded = 0, max(recorded, 1)
	}
	if recorded == 0 {
		scratch = 0
	}
	// the logits; a chunk's activations are Inputs.Prefill (PrefillFor)
	var buffers int64
	logitRows := int64(max(1, r.SpecPositions))
	if r.AllLogits {
		logitRows = int64(max(r.Positions, r.SpecPositions, 1))
	}
	buffers += logitRows * int64(c.VocabSize) * 4
	globals := s.GlobalBytes
	embedStreamed := StreamsEmbedding(r, s)
	switch {
	case r.Ultra:
		globals -= s.TableBytes
		buffers += HeadChunkBytes + int64(c.VocabSize)*4
	case embedStreamed:
		globals -= s.EmbedBytes
		buffers += embedRowBuffer(c.Hidden)
	}
	slot := int64(0)
	if c.Experts > 0 && layers > c.FirstKDense {
		slot = s.SlotBytes
	}
	tableRuns := 0
	switch {
	case !r.Streaming: // the tables are read from the shards, into the heap
	case r.Ultra:
		tableRuns = 1 // the final norms; the tables stream
	case c.TieEmbeddings:
		tableRuns = 2
	case embedStreamed:
		tableRuns = 2 // lm_head and the final norms; the embedding rows stream
	default:
		tableRuns = 3
	}
	return Inputs{LayerBytes: s.LayerBytes, LogicalLayerBytes: s.LogicalLayerBytes, GlobalBytes: globals, ExpertBytes: slot, TopK: c.TopK,
		MappedPage: HugePage, TableRuns: tableRuns,
		MaxExperts: c.Experts * max(0, layers-c.FirstKDense),
		Streaming:  r.Streaming, TrunkBudget: r.TrunkBudget, Ring: r.Ring, CacheBudget: r.CacheBudget,
		StateBytes: (1+backup+int64(copies))*state + scratch, KVPerPos: int64(1+copies) * kvPerPos, Positions: r.Positions, BufferBytes: buffers, BaselineRSS: r.BaselineRSS,
		SpecPositions: recorded, SpecRecordPerPos: record, DraftBytes: r.DraftBytes, DraftPerPos: int64(1+copies) * r.DraftPerPos,
		DraftStream: r.DraftStream, DraftRead: r.DraftRead, DraftStreamed: r.DraftStreamed,
		Chunk: r.Chunk, Prefill: PrefillFor(c, layers, r.Positions, r.Workers), Vision: VisionFor(s.Vision, picture(r), r.Positions, r.Floor),
		EmbedStreamed: embedStreamed}
}

// StreamsEmbedding reports whether a run reads its embedding rows from the
// packed trunk when a token needs them, with lm_head resident: at the
// memory floor (Run.Floor), with layers streamed (the trunk does not fit
// the budget), not ultra (which streams lm_head too), and with an lm_head
// of its own (a tied table is lm_head, which every token reads whole). A
// token's row is hidden x 2 bytes (14 KB at K3's size) next to the trunk
// every token reads at the floor (108.8 GB at laptop), so the resident
// embedding (2.35 GB) buys no speed there.
func StreamsEmbedding(r Run, s Sizes) bool {
	var trunk int64
	for _, b := range s.LayerBytes {
		trunk += b
	}
	return r.Streaming && r.Floor && !r.Ultra && s.EmbedBytes > 0 && trunk > r.TrunkBudget
}

// embedRowBuffer is what reading one embedding row takes: its bytes at
// most f32, rounded up to the direct-I/O alignment, and one alignment more.
func embedRowBuffer(hidden int) int64 { return (int64(hidden)*4+4095)/4096*4096 + 4096 }

// DefaultChatCheckpoints is how many edit checkpoints a chat session keeps
// (copies of the state from just before its last user messages) where the
// budget allows copies (ChatCopies).
const DefaultChatCheckpoints = 2

// ChatCopies is what a chat session keeps at a trunk budget besides its
// live state: a snapshot for Regenerate and DefaultChatCheckpoints edit
// checkpoints, or nothing at the smallest presets (ultra, and laptop, the
// 8 GB floor). A copy of the real K3's state is 0.46 GB of KDA state (69
// layers) and up to 55 KB per position of MLA cache (24 layers), so the
// three cost about 1.4 GB with short conversations and 3 GB at 12288
// positions; at the floor Regenerate and an edit read the prompt again.
func ChatCopies(trunkBytes int64, ultra bool) (snapshot bool, checkpoints int) {
	return ChatCopiesAt(Floor(trunkBytes, ultra))
}

// ChatCopiesAt is ChatCopies of a run at the floor or not (FloorFor).
func ChatCopiesAt(floor bool) (snapshot bool, checkpoints int) {
	if floor {
		return false, 0
	}
	return true, DefaultChatCheckpoints
}

// ChatStateCopies is the number of state copies ChatCopies keeps (the
// plan's Run.StateCopies for a chat session).
func ChatStateCopies(trunkBytes int64, ultra bool) int {
	return ChatStateCopiesAt(Floor(trunkBytes, ultra))
}

// ChatStateCopiesAt is ChatStateCopies of a run at the floor or not.
func ChatStateCopiesAt(floor bool) int {
	snap, n := ChatCopiesAt(floor)
	if snap {
		n++
	}
	return n
}

// picture is the picture r plans for: Run.Picture, within the context.
func picture(r Run) int {
	if r.Positions > 0 {
		return min(r.Picture, r.Positions)
	}
	return r.Picture
}
