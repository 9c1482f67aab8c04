package engine

import "slices"

// PromptCache keeps exact state snapshots of prompts read before, so a
// prompt that starts like one of them is read from there (engine/promptcache
// keeps them in memory and on disk). Partitions never share snapshots.
type PromptCache interface {
	// Longest returns a state of the caller's own whose ids are the first
	// Pos ids of ids, with Pos at most max: the longest the partition holds
	// (nil: none).
	Longest(part string, ids []int, max int) *State
	// Keep stores s in the partition; the cache owns it from then on.
	Keep(part string, s *State)
}

// CacheUse is a generation's use of a prompt cache (GenOptions.Cache).
type CacheUse struct {
	Cache     PromptCache
	Partition string
	// Marks are positions (of the whole sequence, prior ids included) where
	// the state is worth keeping: the end of the system and tools block, the
	// message boundaries (MessageMarks). The prompt's end, and the position
	// before it, are kept too.
	Marks []int
	// Every keeps a snapshot every Every positions of a long stretch without
	// marks (0: DefaultCheckpointEvery; below 0: none).
	Every int
}

// DefaultCheckpointEvery is CacheUse.Every's default: about 225 MB of MLA
// rows of the full model between two snapshots (each of which also holds
// the 0.46 GB KDA state).
const DefaultCheckpointEvery = 4096

// maxMarks caps the snapshots one prompt keeps: the first mark (the system
// and tools block) and the last ones before the prompt's end.
const maxMarks = 8

// forDraft is c for a run with the draft model d attached (c itself
// without one): the run keeps and resumes its own snapshots, apart from
// those of runs without that draft model. A state resumed from a snapshot
// taken without the draft model's context rows drafts nothing for the rest
// of its conversation (the rows need the target's hidden states of every
// position before), and rows of another draft model are not this one's.
func (c *CacheUse) forDraft(d *Draft) *CacheUse {
	if c == nil || d == nil {
		return c
	}
	cu := *c
	cu.Partition += "+draft:" + d.Dir
	return &cu
}

// MessageMarks are the positions just after every end-of-message id in
// ids (the message boundaries of a rendered chat), offset by base.
func MessageMarks(ids []int, base int, ends []int) []int {
	var out []int
	for i, id := range ids {
		if slices.Contains(ends, id) {
			out = append(out, base+i+1)
		}
	}
	return out
}

// marks are the positions after from up to n (the whole sequence's length)
// where reading a prompt keeps snapshots, none past limit.
func (c *CacheUse) marks(from, n, limit int) []int {
	return slices.DeleteFunc(c.allMarks(from, n), func(p int) bool { return p > limit })
}

func (c *CacheUse) allMarks(from, n int) []int {
	var m []int
	for _, p := range c.Marks {
		if p > from && p < n-1 {
			m = append(m, p)
		}
	}
	every := c.Every
	if every == 0 {
		every = DefaultCheckpointEvery
	}
	if every > 0 {
		for p := (from/every + 1) * every; p < n-1; p += every {
			m = append(m, p)
		}
	}
	slices.Sort(m)
	m = slices.Compact(m)
	if len(m) > maxMarks {
		m = append(m[:1], m[len(m)-maxMarks+1:]...)
	}
	if n-1 > from {
		m = append(m, n-1)
	}
	return append(m, n)
}

// resume replaces s by the cache's longest snapshot of full that is longer
// than s, leaving at least leave positions to read (one when logits are
// needed), and returns the positions it added (0: none). A stale s (a
// cancel at the floor dropped its chunk in flight) takes the longest
// snapshot whatever its length: the positions after it are read again.
func (c *CacheUse) resume(s *State, full []int, leave int) int {
	limit := min(len(full)-leave, mediaStart(s, len(full)))
	if s.damaged || (limit <= s.Pos && !s.stale) {
		return 0
	}
	n := c.Cache.Longest(c.Partition, full, limit)
	if n == nil || (n.Pos <= s.Pos && !s.stale) || !slices.Equal(n.IDs, full[:n.Pos]) {
		return 0
	}
	had := s.Pos
	*s = State{Pos: n.Pos, IDs: n.IDs, kda: n.kda, mla: n.mla, draft: n.draft, media: s.allMedia()}
	return s.Pos - had
}

// mediaStart is where the first image of a state's prompt starts (n when
// there is none; 0 when it has fed one whose rows it no longer holds): the
// cache keeps and reuses only snapshots of the text before it, since ids
// alone do not say which picture a pad position read. A stale state
// resumed from such a snapshot reads its pictures again from their rows.
func mediaStart(s *State, n int) int {
	if !s.rereadable() {
		return 0
	}
	for _, m := range s.allMedia() {
		n = min(n, m.At)
	}
	return n
}

// catch makes the snapshots go to the cache as each is taken, so none
// waits in memory beside the next.
func (c *CacheUse) catch(s *State) {
	s.OnCaught(func(n *State) { c.Cache.Keep(c.Partition, n) })
}

// keep stops taking snapshots.
func (c *CacheUse) keep(s *State) {
	s.SetMarks(nil)
	s.OnCaught(nil)
}
