package engine

import (
	"k3/doctor/machine"
)

// Event kinds sent to Engine.Observe.
const (
	EventPrefill = "prefill" // a prefill chunk finished: Done of Total positions
	EventToken   = "token"   // a token was generated: Step, Token, Seconds
)

// Event is one progress or statistics update from the engine. The desktop
// app's gauges and the CLI's reports read the same events.
type Event struct {
	Kind        string
	Done, Total int     // prefill positions
	Step, Token int     // generation step and token id
	Seconds     float64 // this step's wall time
	Stats       Stats   // cumulative counters at the time of the event
}

// Stats are cumulative engine counters.
type Stats struct {
	Positions        int
	RSSBytes         int64
	TrunkBytesRead   int64   // streamed trunk bytes (excludes the initial bind)
	TrunkWaitSeconds float64 // time the forward waited for trunk reads
	Expert           ExpertStats
	ComputeSeconds   float64
}

// IOWaitSeconds is the time the forward pass spent blocked on reads; it never
// counts a read that overlapped computation.
func (s Stats) IOWaitSeconds() float64 { return s.TrunkWaitSeconds + s.Expert.ReadSeconds }

// Sub returns what accumulated since an earlier snapshot.
func (s Stats) Sub(o Stats) Stats {
	return Stats{Positions: s.Positions - o.Positions, RSSBytes: s.RSSBytes,
		TrunkBytesRead: s.TrunkBytesRead - o.TrunkBytesRead, TrunkWaitSeconds: s.TrunkWaitSeconds - o.TrunkWaitSeconds,
		Expert: s.Expert.Sub(o.Expert), ComputeSeconds: s.ComputeSeconds - o.ComputeSeconds}
}

// Snapshot reads the engine's counters now.
func (e *Engine) Snapshot() Stats {
	s := Stats{RSSBytes: machine.RSS()}
	if st, ok := e.M.Experts.(interface{ Stats() ExpertStats }); ok {
		s.Expert = st.Stats()
	}
	if e.layers != nil {
		s.TrunkBytesRead, s.TrunkWaitSeconds = e.layers.trunkStats()
	}
	return s
}

func (e *Engine) emit(ev Event) {
	if e.Observe != nil {
		ev.Stats = e.Snapshot()
		e.Observe(ev)
	}
}
