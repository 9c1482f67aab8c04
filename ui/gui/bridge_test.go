package gui

import (
	"k3/engine/chat"
	"strings"
	"sync"
	"testing"
	"time"

	"k3/engine"
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

func TestSplitBlocks(t *testing.T) {
	md := "Intro *text*.\n\n```go\nfmt.Println(1)\n\nx := 2\n```\nAfter.\n~~~\nraw\n"
	b := SplitBlocks(md)
	if len(b) != 4 || b[0].Code || !b[1].Code || b[1].Lang != "go" || b[1].Text != "fmt.Println(1)\n\nx := 2" ||
		b[2].Text != "After.\n" || !b[3].Code || b[3].Text != "raw" {
		t.Errorf("%+v", b)
	}
}

func TestMessageViewCopyAndThinking(t *testing.T) {
	var copied string
	v := NewMessageView(chatMsg("assistant", "See:\n```sh\nmake test\n```\n", "plan"), func(s string) { copied = s })
	if v.think.Hidden || v.think.Items[0].Open {
		t.Error("a finished thinking section shows folded")
	}
	if len(v.body.Objects) != 2 {
		t.Fatalf("%d blocks", len(v.body.Objects))
	}
	v.copy(v.Answer)
	if copied != "See:\n```sh\nmake test\n```\n" {
		t.Errorf("copy all %q", copied)
	}
}

func chatMsg(role, content, reasoning string) chatMessage {
	return chatMessage{Role: role, Content: content, ReasoningContent: reasoning}
}

type chatMessage = chat.Message
