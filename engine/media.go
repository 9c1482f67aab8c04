package engine

import "fmt"

// mediaSpan gives the input embeddings of positions At .. At+len(Rows)/H-1:
// an image's projected rows (engine/vision) in place of its pad tokens'
// embeddings.
type mediaSpan struct {
	At   int
	Rows []float32
}

// AddMedia makes the positions from absolute position at onwards read
// rows (hidden-size values per position) as their input embeddings
// instead of their tokens' embeddings, for the positions this state has
// not fed yet. The rows are kept until the positions are fed, and are not
// copied (the caller must not change them).
func (s *State) AddMedia(at int, rows []float32, hidden int) error {
	if hidden <= 0 || len(rows) == 0 || len(rows)%hidden != 0 {
		return fmt.Errorf("media rows: %d values are not whole rows of %d", len(rows), hidden)
	}
	if at < s.Pos {
		return fmt.Errorf("media rows at position %d: the state has already fed %d positions", at, s.Pos)
	}
	end := at + len(rows)/hidden
	for _, m := range s.media {
		if at < m.At+len(m.Rows)/hidden && m.At < end {
			return fmt.Errorf("media rows at positions %d..%d overlap rows already given at %d", at, end-1, m.At)
		}
	}
	s.media = append(s.media[:len(s.media):len(s.media)], mediaSpan{At: at, Rows: rows})
	return nil
}

// mediaRow is the input embedding given for absolute position pos, or nil.
func (s *State) mediaRow(pos, hidden int) []float32 {
	for _, m := range s.media {
		if i := pos - m.At; i >= 0 && i < len(m.Rows)/hidden {
			return m.Rows[i*hidden : (i+1)*hidden]
		}
	}
	return nil
}

// dropFedMedia forgets the spans wholly fed (they are never read again).
func (s *State) dropFedMedia(hidden int) {
	var keep []mediaSpan
	for _, m := range s.media {
		if m.At+len(m.Rows)/hidden > s.Pos {
			keep = append(keep, m)
		}
	}
	s.media = keep
}

// freshWithMedia is a fresh state that reads the same media rows as s (a
// recomputation from position 0).
func (m *Model) freshWithMedia(s *State) *State {
	n := m.NewState()
	n.media = s.media[:len(s.media):len(s.media)]
	return n
}
