package engine

import "fmt"

// mediaSpan gives the input embeddings of positions At .. At+len(Rows)/H-1:
// an image's projected rows (engine/vision) in place of its pad tokens'
// embeddings.
type mediaSpan struct {
	At, N int // first position, positions
	Rows  []float32
	Key   uint64
}

// MediaKey records an image a state has fed: its first position, its
// number of positions and the caller's key for its content (a hash of the
// picture). States with the same ids read different images when their
// MediaKeys differ: a reuse of a state must compare both (MediaAgrees).
type MediaKey struct {
	At, N int
	Key   uint64
}

// FedMedia lists the images this state has fed, in position order.
func (s *State) FedMedia() []MediaKey {
	var k []MediaKey
	for _, m := range s.fedMedia {
		k = append(k, m.key())
	}
	return k
}

// key is the span's MediaKey (it stays whole once fed: its N is kept when
// its rows are not).
func (m mediaSpan) key() MediaKey { return MediaKey{At: m.At, N: m.N, Key: m.Key} }

// MediaAgrees reports whether the images this state has fed are exactly
// the images of want (a prompt's images, in position order) that lie
// before the state's position, so that the state can be reused for a
// prompt with those images.
func (s *State) MediaAgrees(want []MediaKey) bool {
	var before []MediaKey
	for _, k := range want {
		if k.At < s.Pos {
			before = append(before, k)
		}
	}
	if len(before) != len(s.fedMedia) {
		return false
	}
	for i, k := range before {
		if k != s.fedMedia[i].key() || k.At+k.N > s.Pos {
			return false
		}
	}
	return true
}

// AddMedia makes the positions from absolute position at onwards read
// rows (hidden-size values per position) as their input embeddings
// instead of their tokens' embeddings, for the positions this state has
// not fed yet. The rows are kept until the positions are fed, and are not
// copied (the caller must not change them).
func (s *State) AddMedia(at int, rows []float32, hidden int, key uint64) error {
	if hidden <= 0 || len(rows) == 0 || len(rows)%hidden != 0 {
		return fmt.Errorf("media rows: %d values are not whole rows of %d", len(rows), hidden)
	}
	if at < s.Pos {
		return fmt.Errorf("media rows at position %d: the state has already fed %d positions", at, s.Pos)
	}
	end := at + len(rows)/hidden
	for _, m := range s.media {
		if at < m.At+m.N && m.At < end {
			return fmt.Errorf("media rows at positions %d..%d overlap rows already given at %d", at, end-1, m.At)
		}
	}
	s.media = append(s.media[:len(s.media):len(s.media)], mediaSpan{At: at, N: end - at, Rows: rows, Key: key})
	return nil
}

// mediaRow is the input embedding given for absolute position pos, or nil.
func (s *State) mediaRow(pos, hidden int) []float32 {
	for _, m := range s.media {
		if i := pos - m.At; i >= 0 && i < m.N {
			return m.Rows[i*hidden : (i+1)*hidden]
		}
	}
	return nil
}

// dropFedMedia moves the spans wholly fed to fedMedia. A span only
// partly fed stays until it is whole. With keep (at the memory floor) the
// fed spans keep their rows: a prompt chunk stopped there is dropped and
// the state read again (Engine.rebuild), the pictures it fed included, and
// a picture's rows cannot be rebuilt from its ids. Otherwise the rows are
// never read again (a stop rolls back from the state's copy) and go.
func (s *State) dropFedMedia(keep bool) {
	var pending []mediaSpan
	for _, m := range s.media {
		if m.At+m.N > s.Pos {
			pending = append(pending, m)
			continue
		}
		if !keep {
			m.Rows = nil
		}
		s.fedMedia = append(s.fedMedia[:len(s.fedMedia):len(s.fedMedia)], m)
	}
	s.media = pending
}

// rereadable reports whether the state can be read again from its ids:
// it holds the rows of every picture it fed (dropFedMedia's keep).
func (s *State) rereadable() bool {
	for _, m := range s.fedMedia {
		if m.Rows == nil {
			return false
		}
	}
	return true
}

// allMedia is every span whose rows the state holds, fed or not, in
// position order: what a state that reads s's ids again from an earlier
// position (position 0, or a snapshot of the text before the first
// picture) is given to read.
func (s *State) allMedia() []mediaSpan {
	var all []mediaSpan
	for _, m := range s.fedMedia {
		if m.Rows != nil {
			all = append(all, m)
		}
	}
	return append(all, s.media...)
}

// freshWithMedia is a fresh state that reads the same media rows as s (a
// recomputation from position 0).
func (m *Model) freshWithMedia(s *State) *State {
	n := m.NewState()
	n.media = s.allMedia()
	return n
}

// DropPendingMedia forgets the rows given for positions not fed yet (a
// prompt that was cut short; the next prompt gives its own).
func (s *State) DropPendingMedia() { s.media = nil }
