package engine

import (
	"context"
	"slices"
)

// Checkpoints of the state inside a forward (the prompt cache's
// snapshots, docs/PROMPTCACHE.md; a chat turn's snapshot and edit
// checkpoint, feedKeeping): a caller that sets State.marks gets, in
// State.caught, a copy of the state after each marked position the forward
// passed. A mark inside a chunk costs no extra pass: the KDA layers copy
// their recurrent state and convolution history as their position loop
// passes it; the MLA rows and the draft model's context rows are per
// position and are cut after the chunk. Each copy is bit for bit the
// state of feeding the positions up to the mark alone.

// capture is the checkpoints the chunk in flight takes: rel[i] positions
// into the chunk, into snaps[i] (KDA parts only until the chunk ends);
// mark[i] says whether it is one of the marks (else it is only a kept
// copy, State.keepAt). media[i] and fed[i] are the images a kept copy
// holds: those the state holds after feeding up to its position.
type capture struct {
	rel   []int
	snaps []*State
	mark  []bool
	media [][]mediaSpan
	fed   [][]mediaSpan
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

// maxMarksInChunk caps the copies one chunk takes inside it for the marks
// (each holds a copy of the KDA state while the chunk runs): the last ones
// are kept. The kept copies (State.keepAt) are not counted: they are a
// chat session's snapshot and edit checkpoint, which the plan counts
// (plan.ChatCopies); nor is a mark at a kept position, whose copy is
// taken for it anyway.
const maxMarksInChunk = 2

// startCapture prepares the copies of the marks, and of the kept
// positions, inside the chunk of T positions from s.Pos (the ones at the
// chunk's end are a Clone afterwards).
func (m *Model) startCapture(s *State, T int) {
	s.catch = nil
	inChunk := func(p int) bool { return p > s.Pos && p < s.Pos+T }
	var marks, shared []int
	for _, p := range s.marks {
		switch {
		case !inChunk(p):
		case slices.Contains(s.keepAt, p):
			shared = append(shared, p) // copied for the kept position anyway
		default:
			marks = append(marks, p)
		}
	}
	marks = append(marks[max(0, len(marks)-maxMarksInChunk):], shared...)
	slices.Sort(marks)
	inside := slices.Clone(marks)
	for _, p := range s.keepAt {
		if inChunk(p) && !slices.Contains(inside, p) {
			inside = append(inside, p)
		}
	}
	if len(inside) == 0 {
		return
	}
	c := &capture{}
	for i, p := range inside {
		c.rel = append(c.rel, p-s.Pos)
		c.snaps = append(c.snaps, s.kdaShell())
		c.mark = append(c.mark, i < len(marks))
		var media, fed []mediaSpan
		if slices.Contains(s.keepAt, p) {
			media, fed = mediaAfter(s.media, s.fedMedia, p, m.lean)
		}
		c.media, c.fed = append(c.media, media), append(c.fed, fed)
	}
	s.catch = c
}

// kdaShell is an empty state with room for s's KDA state (a copy taken
// inside a chunk).
func (s *State) kdaShell() *State {
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
	return n
}

// mediaAfter is what a state holding media and fed holds of them once it
// has fed positions up to p: the images wholly fed by then move to fed
// (as State.dropFedMedia moves them, keeping their rows at the floor:
// lean).
func mediaAfter(media, fed []mediaSpan, p int, lean bool) ([]mediaSpan, []mediaSpan) {
	t := &State{Pos: p, media: media, fedMedia: fed[:len(fed):len(fed)]}
	if len(t.media) > 0 {
		t.dropFedMedia(lean)
	}
	return t.media[:len(t.media):len(t.media)], t.fedMedia
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
// MLA and draft rows appended) and adds the marks' ones, and a copy of s
// when a mark is at its end, to s.caught; the kept copies go to s.kept.
func (s *State) finishCapture(ids []int) {
	c := s.catch
	s.catch = nil
	pos0 := s.Pos - len(ids)
	if c != nil {
		for i, r := range c.rel {
			n := c.snaps[i]
			c.snaps[i] = nil
			s.cutTo(n, pos0+r)
			s.deliver(n, c, i)
		}
	}
	for k, p := range s.keepAt {
		if p == s.Pos {
			s.kept[k] = s.Clone()
		}
	}
	if slices.Contains(s.marks, s.Pos) {
		n := s.Clone()
		n.media = nil // rows for later positions: never a snapshot's
		s.catchOne(n)
	}
}

// cutTo completes n, a copy of the KDA state after absolute position p of
// the chunk s has just fed, with the ids, MLA rows and draft model's
// context rows up to p.
func (s *State) cutTo(n *State, p int) {
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
}

// deliver hands copy i taken inside the chunk, n, to the kept positions
// it is at (s.kept), with the images and the lost draft rows a Clone
// there would hold, and to the marks; each gets a copy of its own.
func (s *State) deliver(n *State, c *capture, i int) {
	used := c.mark[i]
	for k, p := range s.keepAt {
		if p != n.Pos {
			continue
		}
		kept := n
		if used {
			kept = n.Clone() // before the kept copy's images are set
		}
		used = true
		kept.media, kept.fedMedia = c.media[i], c.fed[i]
		if ds := s.draft; ds != nil && ds.n != s.Pos {
			kept.draft = ds.clone() // lost: what a state that fed up to here holds
		}
		s.kept[k] = kept
	}
	if c.mark[i] {
		s.catchOne(n)
	}
}

// feedKeeping is feed of a prompt that also returns a copy of the state
// after each absolute position of at (nil where the feed does not reach
// it, or is past it already), taken inside the pass that reads it: the
// KDA layers copy their state as their position loop passes it, the MLA
// rows are cut after the chunk. Each is bit for bit the state of feeding
// the positions up to it alone, and takes no pass of its own. A copy at
// the state's position is the state before the prompt (a stale state read
// again first). Stopped part-way, a copy is there only when a chunk that
// completed passed its position.
func (e *Engine) feedKeeping(ctx context.Context, s *State, ids, at []int, on func(Event)) ([]float32, []*State, error) {
	kept := make([]*State, len(at))
	if slices.Contains(at, s.Pos) {
		if _, err := e.feed(ctx, s, nil, false, on); err != nil {
			return nil, kept, err
		}
		for k, p := range at {
			if p == s.Pos {
				kept[k] = s.Clone()
			}
		}
	}
	s.keepAt, s.kept = at, kept
	lg, err := e.feed(ctx, s, ids, false, on)
	s.keepAt, s.kept, s.catch = nil, nil, nil
	return lg, kept, err
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
