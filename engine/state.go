package engine

import "k3/engine/plan"

// State is the decoding state of one sequence: the KDA recurrent and
// short-conv state per KDA layer and the MLA latent cache per MLA layer.
// Attention-Residual blocks are per position and are rebuilt in every
// forward, so they are not part of the state.
type State struct {
	Pos int   // positions already processed
	IDs []int // the ids fed so far
	kda []*kdaState
	mla []*mlaCache
	// backup holds, per KDA layer, the layer's state from before the chunk
	// in flight, taken at position backupPos[layer] (-1: none).
	backup    []*kdaState
	backupPos []int
	// damaged: a forward failed part-way with no copy to roll back to.
	damaged bool
	// stale: a cancel at the memory floor stopped a prompt chunk part-way
	// and dropped it (drop): Pos, IDs and the MLA rows are those of the
	// chunks before it, the KDA state is not. The next feed reads IDs
	// again into a fresh state first (Engine.rebuild), or a generation
	// resumes from the prompt cache's last snapshot of them.
	stale bool
	// recording is set around a speculative verification pass: every KDA
	// layer then keeps a copy of its state from before the pass (keep) and
	// records the pass's recurrence inputs in rec, so rewind can drop the
	// rejected positions without reading any weights again.
	recording bool
	rec       []*kdaRecord
	// scratch is the one layer's KDA state a recorded pass runs on
	// (beginLayer), so the state itself is left as it was
	scratch *kdaState
	recBase int // Pos before the recorded pass
	recN    int // positions the recorded pass fed
	// draft holds the attached draft model's context rows (nil: none yet)
	draft *draftState
	// marks are absolute positions after which a feed keeps a copy of the
	// state in caught (capture.go); catch is the chunk in flight's.
	marks    []int
	caught   []*State
	catch    *capture
	onCaught func(*State)
	// keepAt are absolute positions after which the feeds keep a copy of
	// the state in kept (the same index), apart from the marks: a chat
	// turn's edit checkpoint and the state before its prompt's last
	// position (GenOptions.Checkpoint and KeepPrefix; capture.go)
	keepAt []int
	kept   []*State
	// media are input embeddings given for positions not fed yet
	// (AddMedia); fedMedia the images already fed (FedMedia), with their
	// rows at the memory floor (dropFedMedia)
	media    []mediaSpan
	fedMedia []mediaSpan
}

// kdaRecord holds one KDA layer's recurrence inputs for the positions of a
// verification pass, [position][channel]: what the delta rule and the
// short convolutions consumed. Replaying the first n of them from the
// state before the pass gives, bit for bit, the state after n positions.
type kdaRecord struct {
	raw      [3][]float32 // q, k, v before the short convolution (its history)
	k, v, a  []float32    // normalised key, value and decay per channel
	beta     []float32    // [position][head]
	capacity int          // positions the buffers hold
}

type kdaState struct {
	S    []float32    // [heads][key d][value d]
	conv [3][]float32 // q, k, v: [channels][kernel-1], oldest first
}

// mlaCache holds, per position, the normalised latent followed by the raw
// rope dims (kv_lora_rank + qk_rope_head_dim floats).
type mlaCache struct {
	rows  []float32
	width int // floats per position
}

// grow makes room for n more positions in the cache (plannedRows).
func (m *mlaCache) grow(n, planned int) { m.rows = plannedRows(m.rows, n, m.width, planned) }

// plannedRows returns rows (positions of width floats) with room for n
// more positions: when they do not hold them, reallocated to hold the
// positions the plan counts (planned, Plan.KVPositions), or, past those,
// whole plan.ContextStep steps (what plan.Grow adds when a chat or a
// served request grows the plan). So the capacity of the MLA cache and of
// a draft model's context rows is what the plan counts for the positions
// used, never the spare that append's doubling would add (up to twice a
// layer's rows, and both arrays while it copies).
func plannedRows(rows []float32, n, width, planned int) []float32 {
	need := len(rows)/width + n
	if need*width <= cap(rows) {
		return rows
	}
	c := planned
	if need > planned {
		c = (need + plan.ContextStep - 1) / plan.ContextStep * plan.ContextStep
	}
	grown := make([]float32, len(rows), c*width)
	copy(grown, rows)
	return grown
}

// kvPositions are the positions the plan counts KV cache rows for (0: no
// plan).
func (m *Model) kvPositions() int {
	if m.Plan == nil {
		return 0
	}
	return m.Plan.KVPositions
}

// NewState returns an empty state for the model.
func (m *Model) NewState() *State {
	c := m.Cfg
	s := &State{kda: make([]*kdaState, m.Bound), mla: make([]*mlaCache, m.Bound)}
	P := c.KDAHeads * c.KDAHeadDim
	for i := 0; i < m.Bound; i++ {
		if c.IsMLA(i) {
			s.mla[i] = &mlaCache{width: c.KVLoraRank + c.QKRope}
			continue
		}
		k := &kdaState{S: make([]float32, c.KDAHeads*c.KDAHeadDim*c.KDAHeadDim)}
		for j := range k.conv {
			k.conv[j] = make([]float32, P*(c.ConvK-1))
		}
		s.kda[i] = k
	}
	return s
}

// emptied is a fresh state (as Model.NewState's) in s's layer arrays: the
// KDA state and short-convolution history zeroed, the MLA rows cut to
// none, their capacity kept. s must not be read again (a stale state,
// read again from its ids: Engine.rebuild).
func (s *State) emptied() *State {
	n := &State{kda: s.kda, mla: make([]*mlaCache, len(s.mla))}
	for _, k := range s.kda {
		if k != nil {
			clear(k.S)
			for j := range k.conv {
				clear(k.conv[j])
			}
		}
	}
	for i, m := range s.mla {
		if m != nil {
			n.mla[i] = &mlaCache{rows: m.rows[:0], width: m.width}
		}
	}
	return n
}

// keep copies layer li's KDA state before a chunk changes it, so rollback
// can restore it.
func (s *State) keep(li int) {
	k := s.kda[li]
	if k == nil {
		return
	}
	if s.backup == nil {
		s.backup = make([]*kdaState, len(s.kda))
		s.backupPos = make([]int, len(s.kda))
		for i := range s.backupPos {
			s.backupPos[i] = -1
		}
	}
	b := s.backup[li]
	if b == nil {
		b = &kdaState{S: make([]float32, len(k.S))}
		for j := range k.conv {
			b.conv[j] = make([]float32, len(k.conv[j]))
		}
		s.backup[li] = b
	}
	copy(b.S, k.S)
	for j := range k.conv {
		copy(b.conv[j], k.conv[j])
	}
	s.backupPos[li] = s.Pos
}

// beginLayer prepares layer li's KDA state for the pass in flight: in a
// recorded pass the layer runs on the scratch state, a copy of its own,
// which it returns to endLayer (the pass's effect is in the record and is
// replayed afterwards); otherwise, with keep, a copy is kept for rollback.
func (s *State) beginLayer(li int, keep bool) *kdaState {
	k := s.kda[li]
	switch {
	case k == nil:
		return nil
	case s.recording:
		if s.scratch == nil {
			s.scratch = &kdaState{S: make([]float32, len(k.S))}
			for j := range k.conv {
				s.scratch.conv[j] = make([]float32, len(k.conv[j]))
			}
		}
		copy(s.scratch.S, k.S)
		for j := range k.conv {
			copy(s.scratch.conv[j], k.conv[j])
		}
		s.kda[li] = s.scratch
		return k
	case keep:
		s.keep(li)
	}
	return nil
}

// endLayer puts back the state beginLayer set aside (nil: none).
func (s *State) endLayer(li int, live *kdaState) {
	if live != nil {
		s.kda[li] = live
	}
}

// rollback undoes what the chunk in flight did to layers 0..n-1: their MLA
// rows past Pos are dropped and their KDA state restored from keep. A
// recorded pass left the KDA state as it was; a KDA layer of another pass
// without a copy leaves the state damaged.
func (s *State) rollback(n int) {
	for li := 0; li < n && li < len(s.kda); li++ {
		if c := s.mla[li]; c != nil {
			c.rows = c.rows[:min(len(c.rows), s.Pos*c.width)]
			continue
		}
		if s.recording {
			continue
		}
		if s.backup == nil || s.backup[li] == nil || s.backupPos[li] != s.Pos {
			s.damaged = true
			continue
		}
		k, b := s.kda[li], s.backup[li]
		copy(k.S, b.S)
		for j := range k.conv {
			copy(k.conv[j], b.conv[j])
		}
	}
}

// stop undoes what a pass cancelled before layer li did and reports
// whether it stops there: rolled back (from the copy, the record, or
// nothing done yet), or at the floor (lean) dropped (drop). A state is
// read again from its ids and the rows of the pictures it fed, which it
// keeps at the floor (dropFedMedia); one that fed a picture without
// keeping its rows (not fed at the floor) finishes the chunk first.
func (s *State) stop(li int, lean bool) bool {
	switch {
	case li == 0 || !lean || s.recording:
		s.rollback(li)
	case !s.rereadable():
		return false
	default:
		s.drop(li)
	}
	return true
}

// drop is rollback at the memory floor for a pass with no copy of the
// state and no record (a prompt chunk) stopped before layer n: the MLA
// rows of the layers it ran are dropped and the state is marked stale (its
// KDA layers before n took the chunk's positions); pictures of the chunk
// stay to be fed (State.media), and those fed before it keep their rows.
func (s *State) drop(n int) {
	for li := 0; li < n && li < len(s.mla); li++ {
		if c := s.mla[li]; c != nil {
			c.rows = c.rows[:min(len(c.rows), s.Pos*c.width)]
		}
	}
	s.stale = true
}

// record grows layer li's record to T positions and returns it.
func (s *State) record(li, T, P, nh int) *kdaRecord {
	if s.rec == nil {
		s.rec = make([]*kdaRecord, len(s.kda))
	}
	r := s.rec[li]
	if r == nil || r.capacity < T {
		r = &kdaRecord{capacity: T, k: make([]float32, T*P), v: make([]float32, T*P), a: make([]float32, T*P), beta: make([]float32, T*nh)}
		for j := range r.raw {
			r.raw[j] = make([]float32, T*P)
		}
		s.rec[li] = r
	}
	return r
}

// recordBytes is the memory a rollback record takes per position and KDA
// layer: the raw q, k, v, the normalised k, v and the decay (six rows of
// heads*head_dim floats) and beta.
func recordBytes(heads, headDim int) int64 { return plan.KDARecordBytes(heads, headDim) }

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	n := &State{Pos: s.Pos, IDs: append([]int(nil), s.IDs...), kda: make([]*kdaState, len(s.kda)), mla: make([]*mlaCache, len(s.mla)), damaged: s.damaged, stale: s.stale}
	for i, k := range s.kda {
		if k != nil {
			c := &kdaState{S: append([]float32(nil), k.S...)}
			for j := range k.conv {
				c.conv[j] = append([]float32(nil), k.conv[j]...)
			}
			n.kda[i] = c
		}
	}
	for i, m := range s.mla {
		if m != nil {
			n.mla[i] = &mlaCache{rows: append([]float32(nil), m.rows...), width: m.width}
		}
	}
	n.draft = s.draft.clone()
	n.media = s.media[:len(s.media):len(s.media)]
	n.fedMedia = s.fedMedia[:len(s.fedMedia):len(s.fedMedia)]
	return n
}

// Bytes is the memory the state occupies.
func (s *State) Bytes() int64 {
	var n int64
	for _, k := range s.kda {
		if k != nil {
			n += int64(len(k.S)+len(k.conv[0])*3) * 4
		}
	}
	for _, m := range s.mla {
		if m != nil {
			n += int64(cap(m.rows)) * 4
		}
	}
	return n + s.draft.bytes()
}
