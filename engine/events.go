package engine

import (
	"time"

	"k3/machine"
)

// EventKind says what an Event reports.
type EventKind int

// Event kinds. The engine sends prefill and token events; a chat session
// adds the text of the channel each token belongs to; the app adds phases
// and periodic statistics.
const (
	EventPrefill   EventKind = iota // Done of Total prompt positions are in the state (Reused were already)
	EventToken                      // token Token was generated at Step in Seconds
	EventReasoning                  // Text is more of the thinking section
	EventAnswer                     // Text is more of the answer
	EventTool                       // Text is more of a tool call
	EventPhase                      // Text says what is happening ("loading layer 3/93")
	EventStats                      // Stats are fresh
)

var eventNames = [...]string{"prefill", "token", "reasoning", "answer", "tool", "phase", "stats"}

func (k EventKind) String() string {
	if k >= 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "event?"
}

// Event is one progress, text or statistics update. The app's gauges, the
// chat views and the CLI's reports read the same events.
type Event struct {
	Kind                EventKind
	Done, Total, Reused int     // prefill positions
	Chunk               int     // prefill: positions read per pass, the plan's chunk (0: not said)
	Step, Token         int     // generation step and token id
	Seconds             float64 // this step's wall time
	Text                string
	Stats               Stats // cumulative counters at the time of the event
	At                  time.Time
}

// Stats are cumulative engine counters.
type Stats struct {
	Positions        int
	RSSBytes         int64
	TrunkBytesRead   int64   // streamed trunk and table bytes (excludes the initial bind)
	TrunkWaitSeconds float64 // time the forward waited for trunk reads
	// TrunkReadSeconds is the time the streamed layers' reads took (device
	// time, overlapped with compute or not): the layers' bytes over it are
	// the rate the disk gave.
	TrunkReadSeconds float64
	// EmbedBytesRead and HeadBytesRead are the embedding and lm_head bytes
	// read in ultra-low-memory mode, and the embedding's at the memory
	// floor (plan.StreamsEmbedding) (in TrunkBytesRead too; 0 when the
	// tables are resident).
	EmbedBytesRead, HeadBytesRead int64
	// DraftBytesRead are the bytes a streamed draft model read (its
	// matrices, once per drafting cycle; 0 when it is resident).
	DraftBytesRead int64
	// ReadBusySeconds is the time some read was in flight (trunk, tables,
	// experts), overlapped with compute or not.
	ReadBusySeconds float64
	Expert          ExpertStats
	// ForwardPasses counts forwards through the layers: prefill chunks,
	// plain decode steps and speculative verification passes.
	ForwardPasses int64
	// SpecDrafted and SpecAccepted count draft tokens verified and accepted.
	SpecDrafted, SpecAccepted int64
}

// IOWaitSeconds is the time the forward pass spent blocked on reads; it never
// counts a read that overlapped computation.
func (s Stats) IOWaitSeconds() float64 { return s.TrunkWaitSeconds + s.Expert.ReadSeconds }

// IOShare is the share of wall seconds spent waiting on reads (0..1).
func (s Stats) IOShare(wall float64) float64 {
	if wall <= 0 {
		return 0
	}
	return min(max(s.IOWaitSeconds()/wall, 0), 1)
}

// HitRate is the share of expert requests served from memory, and whether
// there were any requests.
func (s Stats) HitRate() (float64, bool) {
	if s.Expert.Requests == 0 {
		return 0, false
	}
	return float64(s.Expert.Hits) / float64(s.Expert.Requests), true
}

// BytesRead is every byte read from disk to generate (trunk, tables,
// experts, a streamed draft model).
func (s Stats) BytesRead() int64 { return s.TrunkBytesRead + s.Expert.BytesRead + s.DraftBytesRead }

// Sub returns what accumulated since an earlier snapshot.
func (s Stats) Sub(o Stats) Stats {
	return Stats{Positions: s.Positions - o.Positions, RSSBytes: s.RSSBytes,
		TrunkBytesRead: s.TrunkBytesRead - o.TrunkBytesRead, TrunkWaitSeconds: s.TrunkWaitSeconds - o.TrunkWaitSeconds,
		TrunkReadSeconds: s.TrunkReadSeconds - o.TrunkReadSeconds, EmbedBytesRead: s.EmbedBytesRead - o.EmbedBytesRead, HeadBytesRead: s.HeadBytesRead - o.HeadBytesRead,
		DraftBytesRead:  s.DraftBytesRead - o.DraftBytesRead,
		ReadBusySeconds: s.ReadBusySeconds - o.ReadBusySeconds, Expert: s.Expert.Sub(o.Expert),
		ForwardPasses: s.ForwardPasses - o.ForwardPasses, SpecDrafted: s.SpecDrafted - o.SpecDrafted, SpecAccepted: s.SpecAccepted - o.SpecAccepted}
}

// AcceptedPerPass is the mean number of draft tokens accepted per forward
// pass (0 without passes).
func (s Stats) AcceptedPerPass() float64 {
	if s.ForwardPasses == 0 {
		return 0
	}
	return float64(s.SpecAccepted) / float64(s.ForwardPasses)
}

// Snapshot reads the engine's counters now.
func (e *Engine) Snapshot() Stats {
	s := e.counters()
	s.RSSBytes = machine.RSS()
	return s
}

// counters are the engine's counters without the RSS (which costs a read
// of /proc).
func (e *Engine) counters() Stats {
	s := Stats{Expert: e.m.experts.Stats(), Positions: int(e.positions.Load()), ReadBusySeconds: e.m.io.seconds(),
		ForwardPasses: e.passes.Load(), SpecDrafted: e.drafted.Load(), SpecAccepted: e.accepted.Load()}
	s.TrunkBytesRead, s.TrunkWaitSeconds, s.TrunkReadSeconds = e.layers.trunkStats()
	s.EmbedBytesRead, s.HeadBytesRead = e.m.tables.bytesRead()
	s.TrunkBytesRead += s.EmbedBytesRead + s.HeadBytesRead
	s.DraftBytesRead = e.m.draft.streamBytes()
	return s
}
