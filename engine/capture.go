package engine

import "slices"

// Checkpoints of the state inside a forward (the prompt cache's
// snapshots, docs/PROMPTCACHE.md): a caller that sets State.marks gets, in
// State.caught, a copy of the state after each marked position the forward
// passed. A mark inside a chunk costs no extra pass: the KDA layers copy
// their recurrent state and convolution history as their position loop
// passes it; the MLA rows and the draft model's context rows are per
// position and are cut after the chunk. Each copy is bit for bit the
// state of feeding the positions up to the mark alone.

// capture is the checkpoints the chunk in flight takes: rel[i] positions
// into the chunk, into snaps[i] (KDA parts only until the chunk ends).
type capture struct {
	rel   []int
	snaps []*State
}

// SetMarks makes the next feeds keep a copy of the state after each of the
// given absolute positions they pass (sorted, duplicates dropped); the
// copies collect in Caught. Nil stops it.
func (s *State) SetMarks(marks []int) {
	m := slices.Clone(marks)
	slices.Sort(m)
	s.marks = slices.Compact(m)
}

// Caught returns the copies the marks produced so far and forgets them.
func (s *State) Caught() []*State {
	c := s.caught
	s.caught = nil
	return c
}

// maxMarksInChunk caps the copies one chunk takes inside it (each holds
// a copy of the KDA state while the chunk runs): the last ones are kept.
const maxMarksInChunk = 2

// startCapture prepares the copies of the marks inside the chunk of T
// positions from s.Pos (the one at the chunk's end is a Clone afterwards).
func (m *Model) startCapture(s *State, T int) {
	s.catch = nil
	var inside []int
	for _, p := range s.marks {
		if p > s.Pos && p < s.Pos+T {
			inside = append(inside, p)
		}
	}
	inside = inside[max(0, len(inside)-maxMarksInChunk):]
	var c *capture
	for _, p := range inside {
		if c == nil {
			c = &capture{}
		}
		n := &State{kda: make([]*kdaState, len(s.kda)), mla: make([]*mlaCache, len(s.mla))}
		for i, k := range s.kda {
			if k != nil {
				ck := &kdaState{S: make([]float32, len(k.S))}
				for j := range k.conv {
					ck.conv[j] = make([]float32, len(k.conv[j]))
				}
				n.kda[i] = ck
			}
		}
		c.rel = append(c.rel, p-s.Pos)
		c.snaps = append(c.snaps, n)
	}
	s.catch = c
}

// kdaHead copies head h's state S (d*d floats) into every copy whose
// mark is after position t of the chunk (called by the KDA loop).
func (c *capture) kdaHead(li, h, t int, S []float32) {
	for i, r := range c.rel {
		if r == t+1 {
			copy(c.snaps[i].kda[li].S[len(S)*h:], S)
		}
	}
}

// convRow copies convolution history j of layer li after position t.
func (c *capture) convRow(li, j, t int, hist []float32) {
	for i, r := range c.rel {
		if r == t+1 {
			copy(c.snaps[i].kda[li].conv[j], hist)
		}
	}
}

// finishCapture completes the chunk's copies once s holds it (ids fed,
// MLA and draft rows appended) and adds them, and a copy of s when a mark
// is at its end, to s.caught.
func (s *State) finishCapture(ids []int) {
	c := s.catch
	s.catch = nil
	pos0 := s.Pos - len(ids)
	if c != nil {
		for i, r := range c.rel {
			n := c.snaps[i]
			p := pos0 + r
			n.Pos, n.IDs = p, slices.Clone(s.IDs[:p])
			for li, mc := range s.mla {
				if mc != nil {
					n.mla[li] = &mlaCache{rows: slices.Clone(mc.rows[:p*mc.width]), width: mc.width}
				}
			}
			if ds := s.draft; ds != nil && ds.n == s.Pos {
				cd := &draftState{n: p, width: ds.width, rows: make([][]float32, len(ds.rows))}
				for l, r := range ds.rows {
					cd.rows[l] = slices.Clone(r[:p*ds.width])
				}
				n.draft = cd
			}
			c.snaps[i] = nil
			s.catchOne(n)
		}
	}
	if slices.Contains(s.marks, s.Pos) {
		n := s.Clone()
		n.media = nil // rows for later positions: never a snapshot's
		s.catchOne(n)
	}
}

// catchOne hands a finished copy to onCaught, or keeps it in caught.
func (s *State) catchOne(n *State) {
	if s.onCaught != nil {
		s.onCaught(n)
		return
	}
	s.caught = append(s.caught, n)
}

// OnCaught makes the marks' copies go to f as each is finished, instead
// of collecting in Caught (nil: they collect).
func (s *State) OnCaught(f func(*State)) { s.onCaught = f }
