package bridge

import (
	"sync"
	"time"

	"k3/engine"
	"k3/engine/chat"
)

// The pump turns the engine's event stream (called on engine goroutines,
// possibly thousands of times a second) into a few UI updates a second:
// streamed text at most TextHz, gauges at GaugeHz, always through do.

const (
	TextHz  = 30
	GaugeHz = 5
	// HistoryWindow is how far back the gauge plots reach.
	HistoryWindow = 5 * time.Minute
)

// Gauges are the values the gauge panel shows.
type Gauges struct {
	RSS, PeakRSS int64   // bytes
	Budget       int64   // the memory plan's total
	Available    int64   // usable memory when the model was opened
	TrunkMBps    float64 // streamed trunk read rate, recent
	ExpertMBps   float64 // expert read rate, recent
	IOShare      float64 // 0..1 of wall clock spent waiting for reads, this turn
	HitRate      float64 // 0..1 expert-cache resident hit rate, this turn
	HitKnown     bool
	SecPerToken  float64 // mean over this turn's generated tokens
	FirstStep    float64 // the first token's step (it includes reading the prompt)
	LastToken    float64 // last step
	TTFT         float64 // seconds from send to the first token (0: none yet)
	// speculative decoding this turn: draft tokens verified and accepted
	Drafted, Accepted int64
	Tokens            int
	// Saved are the numbers the open conversation's history keeps of its
	// last reply, shown until the next turn (nil: none; see OpenConversation)
	Saved *chat.ReplyStats
	// Served is the number of the app's server's request whose numbers
	// the per-turn values are (0: the app's own turn's); Serving: that
	// request is being answered now
	Served  int64
	Serving bool
	Speed   []Point // s/token per generated token
	Memory  []Point // RSS samples
}

// Point is one sample of a history plot; a zero Point (no time) is a gap.
type Point struct {
	T time.Time
	V float64
}

// Meter accumulates engine statistics into Gauges. It is not safe for
// concurrent use: the pump serialises calls.
type Meter struct {
	g        Gauges
	turnT0   time.Time
	turnBase engine.Stats
	haveBase bool
	last     engine.Stats
	lastT    time.Time
	haveLast bool
	tokSum   float64
	// recent are this turn's latest token steps that add up to about a
	// second (at least one): LastToken is their mean
	recent    []float64
	recentSum float64
	// serving: a request of the app's server's holds the engine
	// (ServedStart); waiting is the start of the app's turn that waits for
	// it (zero: none)
	serving bool
	waiting time.Time
}

// TokensPerPass is how many tokens each pass through the model gave this
// turn with speculative decoding (0: no draft was verified). The first token
// comes from reading the prompt; every later pass gives one token plus the
// drafted tokens it accepted, so the passes after it are Tokens-1-Accepted.
func (g Gauges) TokensPerPass() float64 {
	passes := int64(g.Tokens-1) - g.Accepted
	if g.Drafted == 0 || passes <= 0 {
		return 0
	}
	return float64(g.Tokens-1) / float64(passes)
}

// SetLimits records the plan's total and the usable memory.
func (m *Meter) SetLimits(budget, available int64) { m.g.Budget, m.g.Available = budget, available }

// SetBudget records the plan's total as it grew (a longer request of the
// app's server's planned its KV cache).
func (m *Meter) SetBudget(budget int64) { m.g.Budget = budget }

// StartTurn resets the per-turn numbers (I/O share, hit rate, s/token,
// TTFT). While the app's server answers a request the turn waits for the
// engine: the numbers stay the request's, and the turn's start is kept
// for when it ends (ServedEnd), so its first token is timed from t.
func (m *Meter) StartTurn(t time.Time) {
	if m.serving {
		m.waiting = t
		return
	}
	m.clearTurn()
	m.turnT0 = t
}

// ServedStart is the app's server's n-th request taking the engine at t:
// the per-turn numbers (speed, first token, tokens per pass, expert-cache
// hits, I/O share) are its own until ServedEnd, from the same engine
// events as a turn's (Served). A turn of the app's that started before
// waits for the engine: it gets its numbers back when the request ends.
func (m *Meter) ServedStart(t time.Time, n int64) {
	if m.serving {
		return
	}
	m.waiting = m.turnT0
	m.clearTurn()
	m.turnT0, m.serving = t, true
	m.g.Served, m.g.Serving = n, true
}

// Serving reports whether a request of the app's server's holds the
// engine (between ServedStart and ServedEnd).
func (m *Meter) Serving() bool { return m.serving }

// ServedEnd is the server's request giving the engine back: it ends as a
// turn ends (its numbers stay shown); the app's turn that waited for it,
// if any, starts its own numbers, timed from its start.
func (m *Meter) ServedEnd() {
	if !m.serving {
		return
	}
	m.serving, m.g.Serving = false, false
	m.endTurn()
	if w := m.waiting; !w.IsZero() {
		m.waiting = time.Time{}
		m.clearTurn()
		m.turnT0 = w
	}
}

// OpenConversation is a conversation being opened (or started) between
// turns: the numbers of the turn before, another conversation's, are
// dropped, and the last reply's numbers as the opened one's history keeps
// them (st, nil for none) are shown instead. The memory and the plots are
// the process's and the model's, not the conversation's: they stay.
func (m *Meter) OpenConversation(st *chat.ReplyStats) {
	if !m.serving { // the server's request keeps its numbers as it runs
		m.clearTurn()
	}
	if st != nil {
		c := *st
		m.g.Saved = &c
	}
}

// ShowReply shows a finished reply's numbers as its message shows them
// (the panel's own count of the stream may differ: a server's deltas are
// not its tokens); the next turn's numbers replace them.
func (m *Meter) ShowReply(st *chat.ReplyStats) {
	if st != nil {
		c := *st
		m.g.Saved = &c
	}
}

func (m *Meter) clearTurn() {
	m.turnT0 = time.Time{}
	m.haveBase = false
	m.g.TTFT, m.g.Tokens, m.tokSum, m.g.SecPerToken, m.g.LastToken, m.g.FirstStep = 0, 0, 0, 0, 0, 0
	m.g.IOShare, m.g.HitRate, m.g.HitKnown = 0, 0, false
	m.g.Drafted, m.g.Accepted = 0, 0
	m.g.Saved = nil
	m.g.Served = 0
	m.recent, m.recentSum = m.recent[:0], 0
}

// Stats applies a statistics snapshot taken at t.
func (m *Meter) Stats(t time.Time, s engine.Stats) {
	if s.RSSBytes > 0 {
		m.g.RSS = s.RSSBytes
		m.g.PeakRSS = max(m.g.PeakRSS, s.RSSBytes)
		m.g.Memory = appendWindow(m.g.Memory, Point{t, float64(s.RSSBytes)}, t)
	}
	if m.haveLast {
		if dt := t.Sub(m.lastT).Seconds(); dt >= 0.2 {
			d := s.Sub(m.last)
			m.g.TrunkMBps = float64(d.TrunkBytesRead) / 1e6 / dt
			m.g.ExpertMBps = float64(d.Expert.BytesRead) / 1e6 / dt
			m.last, m.lastT = s, t
		}
	} else {
		m.last, m.lastT, m.haveLast = s, t, true
	}
	if !m.turnT0.IsZero() {
		if !m.haveBase {
			m.turnBase, m.haveBase = s, true
		}
		d := s.Sub(m.turnBase)
		if wall := t.Sub(m.turnT0).Seconds(); wall > 0 {
			m.g.IOShare = min(max(d.IOWaitSeconds()/wall, 0), 1)
		}
		if d.Expert.Requests > 0 {
			m.g.HitRate, m.g.HitKnown = float64(d.Expert.Hits)/float64(d.Expert.Requests), true
		}
		m.g.Drafted, m.g.Accepted = d.SpecDrafted, d.SpecAccepted
	}
}

// EndTurn marks the end of a turn: nothing is being read any more, so the
// read rates drop to zero (the per-turn numbers stay until the next turn),
// and the plots get a gap instead of a line across the idle time. A
// request of the app's server's that took the engine as the turn ended
// goes on (its ServedEnd ends it).
func (m *Meter) EndTurn() {
	if m.serving {
		m.waiting = time.Time{}
		return
	}
	m.endTurn()
}

func (m *Meter) endTurn() {
	m.g.TrunkMBps, m.g.ExpertMBps = 0, 0
	m.haveLast = false
	m.turnT0 = time.Time{}
	m.g.Speed = append(m.g.Speed, Point{})
	m.g.Memory = append(m.g.Memory, Point{})
}

// recentSpan is how much time the "last" speed is measured over.
const recentSpan = 1.0

// Token records one generated token's step time.
func (m *Meter) Token(t time.Time, seconds float64) {
	if m.g.Tokens == 0 {
		m.g.FirstStep = seconds
		if !m.turnT0.IsZero() {
			m.g.TTFT = t.Sub(m.turnT0).Seconds()
		}
	}
	m.g.Tokens++
	m.tokSum += seconds
	// The last step alone is not a speed when tokens come in bursts (a
	// server's stream through buffers, a pass that accepted drafts): it
	// gave "353982 tokens/s" (issue 27, G12). The steps of the last second
	// or so are; the first step, which includes reading the prompt, is not
	// one of them.
	if m.g.Tokens == 1 {
		m.g.LastToken = seconds
	} else {
		m.recent = append(m.recent, seconds)
		m.recentSum += seconds
		for len(m.recent) > 1 && m.recentSum-m.recent[0] >= recentSpan {
			m.recent = m.recent[1:]
			m.recentSum = 0 // summed again: no rounding drift
			for _, x := range m.recent {
				m.recentSum += x
			}
		}
		m.g.LastToken = m.recentSum / float64(len(m.recent))
	}
	m.g.SecPerToken = m.tokSum / float64(m.g.Tokens)
	m.g.Speed = appendWindow(m.g.Speed, Point{t, seconds}, t)
}

// Gauges returns a copy of the current values.
func (m *Meter) Gauges() Gauges {
	g := m.g
	g.Speed = append([]Point(nil), m.g.Speed...)
	g.Memory = append([]Point(nil), m.g.Memory...)
	return g
}

func appendWindow(ps []Point, p Point, now time.Time) []Point {
	ps = append(ps, p)
	cut := 0
	for cut < len(ps) && (ps[cut].T.IsZero() || now.Sub(ps[cut].T) > HistoryWindow) {
		cut++
	}
	if cut > 0 {
		ps = append(ps[:0], ps[cut:]...)
	}
	return ps
}

// Pump collects a turn's events from engine goroutines and delivers them to
// the UI, throttled. Its callbacks run on the UI goroutine (through the
// do function the app gives, fyne.Do).
type Pump struct {
	OnText   func(reasoning, answer string) // the text added since the last call
	OnPhase  func(phase string)
	OnGauges func(Gauges)
	do       func(func())

	mu         sync.Mutex
	meter      Meter
	reasoning  []byte
	answer     []byte
	phase      string
	phaseDirty bool
	gaugeDirty bool
	stop       chan struct{}
	done       chan struct{}
	inflight   chan struct{} // closed when the delivery handed to do has run
}

// NewPump returns a stopped pump; Start runs it. do runs a function on the
// UI goroutine (fyne.Do in the app).
func NewPump(do func(func())) *Pump {
	return &Pump{do: do}
}

// Meter gives locked access to the pump's meter.
func (p *Pump) WithMeter(f func(m *Meter)) {
	p.mu.Lock()
	f(&p.meter)
	p.gaugeDirty = true
	p.mu.Unlock()
}

// Event takes one chat event; safe from any goroutine, never blocks.
func (p *Pump) Event(ev engine.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case engine.EventReasoning:
		p.reasoning = append(p.reasoning, ev.Text...)
	case engine.EventAnswer:
		p.answer = append(p.answer, ev.Text...)
	case engine.EventPhase:
		p.phase, p.phaseDirty = ev.Text, true
	default:
		p.count(ev)
	}
}

// count gives the meter an event's counters, prompt reading and token
// (with p.mu held) and reports whether ev was one of those.
func (p *Pump) count(ev engine.Event) bool {
	at := EventTime(ev)
	switch ev.Kind {
	case engine.EventStats, engine.EventPrefill:
		p.meter.Stats(at, ev.Stats)
	case engine.EventToken:
		p.meter.Stats(at, ev.Stats)
		p.meter.Token(at, ev.Seconds)
	default:
		return false
	}
	p.gaugeDirty = true
	return true
}

// Served takes one event of a request the app's server answers (on the
// server's goroutines; never blocks): the meter counts its counters,
// prompt reading and tokens as a turn's (ServedStart); the reply's text is
// the other program's, not the window's. It reports whether the event is
// one to show at once: a sample of the counters, the request's first
// token (its first-token time).
func (p *Pump) Served(ev engine.Event) (now bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.count(ev) {
		return false
	}
	return ev.Kind == engine.EventStats || ev.Kind == engine.EventToken && p.meter.g.Tokens == 1
}

// Start begins delivering updates until Stop.
func (p *Pump) Start() {
	p.mu.Lock()
	if p.stop != nil {
		p.mu.Unlock()
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	stop, done := p.stop, p.done
	p.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second / TextHz)
		defer t.Stop()
		n := 0
		for {
			select {
			case <-stop:
				p.flush(true, true)
				return
			case <-t.C:
				n++
				p.flush(n%(TextHz/GaugeHz) == 0, false)
			}
		}
	}()
}

// Stop delivers what is pending and stops; it returns after the last
// delivery was handed to the UI.
func (p *Pump) Stop() {
	p.mu.Lock()
	stop, done := p.stop, p.done
	p.stop = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// Flush delivers pending updates now (tests and the end of a turn).
func (p *Pump) Flush() { p.flush(true, true) }

// flush hands what is pending to the UI. A delivery still waiting to run
// on the UI goroutine holds the next one back (its text keeps
// accumulating), so a UI slower than TextHz is never handed a backlog;
// final waits for it and delivers everything.
func (p *Pump) flush(gauges, final bool) {
	p.mu.Lock()
	if ch := p.inflight; ch != nil {
		if !final {
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		<-ch
		p.mu.Lock()
	}
	r, a := string(p.reasoning), string(p.answer)
	p.reasoning, p.answer = p.reasoning[:0], p.answer[:0]
	phase, phaseDirty := p.phase, p.phaseDirty
	p.phaseDirty = false
	var g Gauges
	sendG := gauges && p.gaugeDirty
	if sendG {
		g = p.meter.Gauges()
		p.gaugeDirty = false
	}
	if r == "" && a == "" && !phaseDirty && !sendG {
		p.mu.Unlock()
		return
	}
	done := make(chan struct{})
	p.inflight = done
	p.mu.Unlock()
	p.do(func() {
		defer func() {
			p.mu.Lock()
			p.inflight = nil
			p.mu.Unlock()
			close(done)
		}()
		if (r != "" || a != "") && p.OnText != nil {
			p.OnText(r, a)
		}
		if phaseDirty && p.OnPhase != nil {
			p.OnPhase(phase)
		}
		if sendG && p.OnGauges != nil {
			p.OnGauges(g)
		}
	})
}
