package bridge

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
)

func TestMeterValues(t *testing.T) {
	var m Meter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SetLimits(8e9, 16e9)
	m.StartTurn(t0)
	m.Stats(t0, engine.Stats{RSSBytes: 5e9, TrunkBytesRead: 1e9, Expert: engine.ExpertStats{Requests: 10, Hits: 5, BytesRead: 2e9}})
	// one second later: +3 GB trunk, +1 GB experts, 0.25 s trunk wait + 0.25 s expert wait
	s1 := engine.Stats{RSSBytes: 7e9, TrunkBytesRead: 4e9, TrunkWaitSeconds: 0.25,
		Expert: engine.ExpertStats{Requests: 30, Hits: 20, BytesRead: 3e9, ReadSeconds: 0.25}}
	m.Stats(t0.Add(time.Second), s1)
	m.Token(t0.Add(1500*time.Millisecond), 2)
	m.Token(t0.Add(2500*time.Millisecond), 1)
	m.Stats(t0.Add(1100*time.Millisecond), engine.Stats{RSSBytes: 6e9, TrunkBytesRead: 4e9,
		TrunkWaitSeconds: 0.25, Expert: s1.Expert, SpecDrafted: 9, SpecAccepted: 4})
	g := m.Gauges()
	if g.RSS != 6e9 || g.PeakRSS != 7e9 || g.Budget != 8e9 || g.Available != 16e9 {
		t.Errorf("memory %+v", g)
	}
	if g.TrunkMBps != 3000 || g.ExpertMBps != 1000 {
		t.Errorf("rates trunk %v expert %v", g.TrunkMBps, g.ExpertMBps)
	}
	if g.HitRate != 0.75 || !g.HitKnown { // (20-5)/(30-10)
		t.Errorf("hit rate %v", g.HitRate)
	}
	if want := 0.5 / 1.1; g.IOShare < want-1e-9 || g.IOShare > want+1e-9 {
		t.Errorf("I/O share %v want %v", g.IOShare, want)
	}
	if g.Drafted != 9 || g.Accepted != 4 {
		t.Errorf("drafts %+v", g)
	}
	if g.TTFT != 1.5 || g.Tokens != 2 || g.SecPerToken != 1.5 || g.LastToken != 1 || len(g.Speed) != 2 || len(g.Memory) != 3 {
		t.Errorf("speed %+v", g)
	}
	// samples older than the window fall out of the plots
	m.Token(t0.Add(HistoryWindow+2*time.Second), 1)
	if g := m.Gauges(); len(g.Speed) != 2 || g.Speed[0].V != 1 {
		t.Errorf("window: %+v", g.Speed)
	}
}

func TestPumpThrottlesAndKeepsAllText(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var r, a strings.Builder
	phases := []string{}
	p := NewPump(func(f func()) { mu.Lock(); defer mu.Unlock(); f() })
	p.OnText = func(rs, as string) { calls++; r.WriteString(rs); a.WriteString(as) }
	p.OnPhase = func(s string) { phases = append(phases, s) }
	gauges := 0
	p.OnGauges = func(Gauges) { gauges++ }
	p.Start()
	start := time.Now()
	p.Event(engine.Event{Kind: engine.EventPhase, Text: "thinking"})
	for i := 0; i < 2000; i++ {
		p.Event(engine.Event{Kind: engine.EventReasoning, Text: "r"})
		p.Event(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: int64(i + 1)}})
	}
	p.Event(engine.Event{Kind: engine.EventPhase, Text: "answering"})
	for i := 0; i < 2000; i++ {
		p.Event(engine.Event{Kind: engine.EventAnswer, Text: "a"})
		if i%400 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	p.Stop()
	elapsed := time.Since(start).Seconds()
	mu.Lock()
	defer mu.Unlock()
	if r.Len() != 2000 || a.Len() != 2000 {
		t.Errorf("text lost: %d %d", r.Len(), a.Len())
	}
	if max := int(elapsed*TextHz) + 2; calls > max {
		t.Errorf("%d text deliveries in %.2f s (at most %d at %d Hz)", calls, elapsed, max, TextHz)
	}
	if max := int(elapsed*GaugeHz) + 2; gauges > max || gauges < 1 {
		t.Errorf("%d gauge deliveries in %.2f s", gauges, elapsed)
	}
	if len(phases) == 0 || phases[len(phases)-1] != "answering" {
		t.Errorf("phases %v", phases)
	}
}

// A UI slower than the pump never gets a backlog: at most one delivery
// waits for it at a time, and all the text still arrives.
func TestPumpHoldsBackForASlowUI(t *testing.T) {
	queue := make(chan func(), 1000)
	var mu sync.Mutex
	waiting, most := 0, 0
	do := func(f func()) {
		mu.Lock()
		waiting++
		most = max(most, waiting)
		mu.Unlock()
		queue <- f
	}
	uiDone := make(chan struct{})
	go func() { // the UI goroutine: 50 ms a frame
		defer close(uiDone)
		for f := range queue {
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			waiting--
			mu.Unlock()
			f()
		}
	}()
	p := NewPump(do)
	var got strings.Builder
	p.OnText = func(_, a string) { got.WriteString(a) }
	p.Start()
	for i := 0; i < 300; i++ {
		p.Event(engine.Event{Kind: engine.EventAnswer, Text: "a"})
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	close(queue)
	<-uiDone
	if most > 1 {
		t.Errorf("%d deliveries waited for the UI at once", most)
	}
	if got.Len() != 300 {
		t.Errorf("%d of 300 bytes delivered", got.Len())
	}
}

// Walk-through 16: after a turn the read rates drop to 0 and the plots get
// a gap instead of a line across the idle time.
func TestMeterEndTurnIdles(t *testing.T) {
	var m Meter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.StartTurn(t0)
	m.Stats(t0, engine.Stats{RSSBytes: 1e9, Expert: engine.ExpertStats{BytesRead: 0}})
	m.Stats(t0.Add(time.Second), engine.Stats{RSSBytes: 1e9, Expert: engine.ExpertStats{BytesRead: 414e6}})
	m.Token(t0.Add(time.Second), 0.5)
	if g := m.Gauges(); g.ExpertMBps != 414 {
		t.Fatalf("expert rate %v", g.ExpertMBps)
	}
	m.EndTurn()
	g := m.Gauges()
	if g.ExpertMBps != 0 || g.TrunkMBps != 0 {
		t.Errorf("idle rates %v %v", g.ExpertMBps, g.TrunkMBps)
	}
	if n := len(g.Speed); n != 2 || !g.Speed[n-1].T.IsZero() {
		t.Errorf("no gap after the turn: %+v", g.Speed)
	}
	m.StartTurn(t0.Add(time.Minute))
	m.Token(t0.Add(time.Minute+time.Second), 0.5)
	if g := m.Gauges(); len(g.Speed) != 3 || g.Speed[1].T.IsZero() == false {
		t.Errorf("the gap stays between the turns: %+v", g.Speed)
	}
}

// Opening another conversation drops the turn's numbers (they were
// another conversation's) and shows the opened one's saved last reply;
// memory and the plots, the process's, stay; the next turn starts clean.
func TestMeterOpenConversation(t *testing.T) {
	var m Meter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SetLimits(8e9, 16e9)
	m.StartTurn(t0)
	m.Stats(t0, engine.Stats{RSSBytes: 5e9, Expert: engine.ExpertStats{Requests: 10, Hits: 5}})
	m.Stats(t0.Add(time.Second), engine.Stats{RSSBytes: 6e9, TrunkWaitSeconds: 0.5, SpecDrafted: 3, SpecAccepted: 2,
		Expert: engine.ExpertStats{Requests: 20, Hits: 15}})
	m.Token(t0.Add(1500*time.Millisecond), 2)
	m.EndTurn()
	before := m.Gauges()
	require.Equal(t, 1, before.Tokens)
	require.True(t, before.HitKnown)

	saved := &chat.ReplyStats{Tokens: 87, FirstTokenSeconds: 1.42, SecondsPerToken: 0.08}
	m.OpenConversation(saved)
	saved.Tokens = 1 // the meter keeps its own copy
	g := m.Gauges()
	assert.Equal(t, &chat.ReplyStats{Tokens: 87, FirstTokenSeconds: 1.42, SecondsPerToken: 0.08}, g.Saved)
	assert.Zero(t, g.Tokens)
	assert.Zero(t, g.SecPerToken)
	assert.Zero(t, g.LastToken)
	assert.Zero(t, g.TTFT)
	assert.Zero(t, g.IOShare)
	assert.Zero(t, g.HitRate)
	assert.False(t, g.HitKnown)
	assert.Zero(t, g.Drafted)
	assert.Zero(t, g.Accepted)
	assert.Equal(t, before.RSS, g.RSS)
	assert.Equal(t, before.PeakRSS, g.PeakRSS)
	assert.Equal(t, before.Budget, g.Budget)
	assert.Equal(t, before.Available, g.Available)
	assert.Equal(t, before.Speed, g.Speed)
	assert.Equal(t, before.Memory, g.Memory)

	m.OpenConversation(nil)
	assert.Nil(t, m.Gauges().Saved, "a conversation without saved numbers shows none")

	m.OpenConversation(saved)
	m.StartTurn(t0.Add(time.Minute))
	m.Stats(t0.Add(time.Minute), engine.Stats{RSSBytes: 6e9})
	m.Token(t0.Add(time.Minute+time.Second), 0.5)
	g = m.Gauges()
	assert.Nil(t, g.Saved, "a turn shows its own numbers")
	assert.Equal(t, 1, g.Tokens)
	assert.Equal(t, 1.0, g.TTFT)
}

// A request of the app's server's has the panel's per-turn numbers while
// it holds the engine; an app turn started meanwhile waits: its numbers
// start when the request ends, its first token timed from its own start;
// a turn that ends as a request took the engine leaves the request's
// numbers alone; the request's text is not the window's.
func TestMeterServedRequest(t *testing.T) {
	p := NewPump(func(f func()) { f() })
	t0 := time.Unix(1000, 0)
	var m0 Gauges
	p.WithMeter(func(m *Meter) {
		m.ServedStart(t0, 4)
		m0 = m.Gauges()
	})
	assert.True(t, m0.Serving)
	assert.Equal(t, int64(4), m0.Served)
	assert.True(t, p.Served(engine.Event{Kind: engine.EventStats, At: t0, Stats: engine.Stats{Expert: engine.ExpertStats{Requests: 10, Hits: 10}}}))
	assert.True(t, p.Served(engine.Event{Kind: engine.EventToken, Seconds: 0.5, At: t0.Add(2 * time.Second),
		Stats: engine.Stats{Expert: engine.ExpertStats{Requests: 20, Hits: 15}}}), "the first token: at once")
	assert.False(t, p.Served(engine.Event{Kind: engine.EventToken, Seconds: 0.25, At: t0.Add(2250 * time.Millisecond)}))
	assert.False(t, p.Served(engine.Event{Kind: engine.EventAnswer, Text: "not the window's"}))
	send := t0.Add(time.Second) // the app's message, sent while the request runs
	var g, app Gauges
	p.WithMeter(func(m *Meter) {
		m.StartTurn(send)
		g = m.Gauges()
		m.ServedEnd()
		app = m.Gauges()
	})
	assert.Equal(t, 2, g.Tokens, "the request's tokens stay its own while the turn waits")
	assert.InDelta(t, 2.0, g.TTFT, 1e-9, "from the request's start")
	assert.InDelta(t, 0.375, g.SecPerToken, 1e-9)
	assert.InDelta(t, 0.5, g.HitRate, 1e-9, "the request's expert-cache hits")
	assert.True(t, g.Serving)
	assert.Equal(t, 0, app.Tokens)
	assert.False(t, app.Serving)
	assert.Equal(t, int64(0), app.Served, "the app's turn's numbers now")
	p.Event(engine.Event{Kind: engine.EventToken, Seconds: 1, At: send.Add(3 * time.Second)})
	p.WithMeter(func(m *Meter) { app = m.Gauges() })
	assert.InDelta(t, 3.0, app.TTFT, 1e-9, "the app's first token, timed from its Send")

	// a turn that ends as the next request took the engine
	p.WithMeter(func(m *Meter) {
		m.ServedStart(send.Add(4*time.Second), 5)
		m.EndTurn() // the app's turn's end, after the request began
		g = m.Gauges()
	})
	assert.True(t, g.Serving)
	assert.Equal(t, int64(5), g.Served)
	p.Served(engine.Event{Kind: engine.EventToken, Seconds: 0.1, At: send.Add(5 * time.Second)})
	p.WithMeter(func(m *Meter) { m.ServedEnd(); g = m.Gauges() })
	assert.Equal(t, 1, g.Tokens)
	assert.InDelta(t, 1.0, g.TTFT, 1e-9)
	assert.Equal(t, int64(5), g.Served, "the request's numbers stay shown after it, labelled")
}
