package bridge

// ModelClosed is the model being let go (the user chose another one): its
// memory, its plan and its read rates are no longer what the panel shows
// next to "No model loaded yet" (G22); the plots get a gap. The available
// memory is the machine's: it stays.
func (m *Meter) ModelClosed() {
	m.clearTurn()
	m.g.RSS, m.g.PeakRSS, m.g.Budget = 0, 0, 0
	m.g.TrunkMBps, m.g.ExpertMBps = 0, 0
	m.haveLast = false
	if n := len(m.g.Speed); n > 0 && !m.g.Speed[n-1].T.IsZero() {
		m.g.Speed = append(m.g.Speed, Point{})
	}
	if n := len(m.g.Memory); n > 0 && !m.g.Memory[n-1].T.IsZero() {
		m.g.Memory = append(m.g.Memory, Point{})
	}
}
