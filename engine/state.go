package engine

// State is the decoding state of one sequence: the KDA recurrent and
// short-conv state per KDA layer and the MLA latent cache per MLA layer.
// Attention-Residual blocks are per position and are rebuilt in every
// forward, so they are not part of the state.
type State struct {
	Pos int   // positions already processed
	IDs []int // the ids fed so far
	kda []*kdaState
	mla []*mlaCache
}

type kdaState struct {
	S    []float32    // [heads][key d][value d]
	conv [3][]float32 // q, k, v: [channels][kernel-1], oldest first
}

// mlaCache holds, per position, the normalised latent followed by the raw
// rope dims (kv_lora_rank + qk_rope_head_dim floats).
type mlaCache struct {
	rows []float32
}

// NewState returns an empty state for the model.
func (m *Model) NewState() *State {
	c := m.Cfg
	s := &State{kda: make([]*kdaState, m.Bound), mla: make([]*mlaCache, m.Bound)}
	P := c.KDAHeads * c.KDAHeadDim
	for i := 0; i < m.Bound; i++ {
		if c.IsMLA(i) {
			s.mla[i] = &mlaCache{}
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

// Clone returns a deep copy of the state.
func (s *State) Clone() *State {
	n := &State{Pos: s.Pos, IDs: append([]int(nil), s.IDs...), kda: make([]*kdaState, len(s.kda)), mla: make([]*mlaCache, len(s.mla))}
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
			n.mla[i] = &mlaCache{rows: append([]float32(nil), m.rows...)}
		}
	}
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
	return n
}
