package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/engine/synth"
	"k3/tokenizer"
)

// WaitingForServer is the phase of a turn that waits while the app's own
// server answers a request on the same engine (short enough for the
// status line at 1024x640: the longer one was cut off).
const WaitingForServer = "waiting for the server: it is answering another program's request"

// engineChat is the app's chat engine: the in-process engine and a
// chat.Session over it (the same session `k3 chat` drives).
type engineChat struct {
	s Settings

	mu   sync.Mutex
	tok  *tokenizer.Tokenizer
	m    *engine.Model
	e    *engine.Engine
	sess *chat.Session
	info ModelInfo
	// opened are the open model's options: the server's session keeps the
	// state copies they allow
	opened engine.Options
	// planned are the positions the plan reserves now: the conversation's
	// context when opened, grown for the server's longer requests
	// (growContext); readMemory reads the memory available (nil:
	// doctor.ReadMemory)
	planned    int
	readMemory func() (plan.Memory, error)
	srv        atomic.Pointer[appServer] // the app's HTTP server over this model (appserver.go)
	// eta tells where reading a prompt is; its pass time carries over to
	// the next prompt's estimate
	eta PrefillETA
	// noDraft leaves the attached draft model out of the turns (SetDraft)
	noDraft atomic.Bool
	// rate is the prompt reading's pass time and chunk as the last turn
	// measured them (PromptRate), read by the views between turns
	rateMu    sync.Mutex
	passSec   float64
	passChunk int
	// cache is the prompt cache (nil: off), shared with the app's server
	cache engine.PromptCache
	// served counts the requests the app's server answered; serveWatch
	// gets what the server does (WatchServer)
	served    atomic.Int64
	answering atomic.Bool // a request of the server's holds the engine
	// planBytes is the memory plan's total as the panel shows it
	// (ModelInfo.BudgetBytes), grown with the server's longer requests
	planBytes  atomic.Int64
	serveWatch atomic.Pointer[func(engine.Event)]
	// tune adjusts the options the model opens with (NewEngineChatWith)
	tune func(*engine.Options)
}

// PromptRate is the measured time of one pass over a prompt and the
// positions it reads (PromptMeter).
func (c *engineChat) PromptRate() (float64, int) {
	c.rateMu.Lock()
	defer c.rateMu.Unlock()
	return c.passSec, c.passChunk
}

// CountTokens is text's length in positions, with the model's tokenizer
// (PromptMeter); not while a turn or the server holds the engine.
func (c *engineChat) CountTokens(text string) (int, bool) {
	if !c.mu.TryLock() {
		return 0, false
	}
	defer c.mu.Unlock()
	if c.tok == nil {
		return 0, false
	}
	return len(c.tok.Encode(text)), true
}

// ContextPositions is the conversation context the memory plan reserves,
// the reply included: plan.ContextPositions, the context the doctor plans
// (doctor.PlanPositions), so the preset "auto" picks is the plan the app
// opens. A longer reply cap plans its own length (Settings.Positions).
const ContextPositions = plan.ContextPositions

// NewEngineChat returns a chat engine for the model the settings name.
func NewEngineChat(s Settings) ChatEngine {
	c := &engineChat{s: s}
	c.noDraft.Store(s.NoDraft)
	return c
}

// NewEngineChatWith is NewEngineChat with the options the model opens
// with adjusted by tune: the real-window check forces a short prefill
// chunk, so a prompt takes many passes to read, as K3's does.
func NewEngineChatWith(s Settings, tune func(*engine.Options)) ChatEngine {
	c := NewEngineChat(s).(*engineChat)
	c.tune = tune
	return c
}

// SetDraft turns the draft model on or off for the next turns; the model
// stays loaded (DraftSwitch).
func (c *engineChat) SetDraft(on bool) { c.noDraft.Store(!on) }

// draftNote says what the draft model does on m (ModelInfo.Draft): where
// every layer and every expert is in memory, a pass's cost is its compute,
// which grows with the positions it reads, and the engine's controller
// never drafts.
func draftNote(m *engine.Model, wanted bool) string {
	switch {
	case !wanted:
		return ""
	case m.DraftModel() == nil:
		return DraftNoRoom
	}
	experts := m.Cfg.Experts * max(0, m.Bound-m.Cfg.FirstKDense)
	if !m.Streamed() && m.Plan.CacheSlots >= experts {
		return DraftNotFaster
	}
	return DraftWhenFaster
}

// DraftBeside is the draft model's folder beside the model in dir: its
// "draft" subfolder when that holds a config.json (as `k3 demo` writes it;
// docs/DSPARK.md), else "".
func DraftBeside(dir string) string {
	if dir == "" {
		return ""
	}
	d := filepath.Join(dir, "draft")
	if fi, err := os.Stat(filepath.Join(d, "config.json")); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return d
}

// PresetBudget resolves a preset (plan.Resolve; "auto" from memory), the
// laptop preset when it cannot be.
func PresetBudget(name string, mem *plan.Memory) plan.Budget {
	if b, err := plan.Resolve(name, mem, doctor.Need); err == nil {
		return b
	}
	return plan.Presets[1].Budget() // laptop
}

// pollStats sends e's counters to on four times a second (the gauges
// keep moving during long steps) until the function it returns is called.
func pollStats(e *engine.Engine, on func(engine.Event)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				on(engine.Event{Kind: engine.EventStats, Stats: e.Snapshot(), At: now})
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func phase(on func(engine.Event), text string) {
	on(engine.Event{Kind: engine.EventPhase, Text: text, At: time.Now()})
}

// lock takes the engine, saying so when the app's server holds it (G13:
// the app's message sat empty while a request was answered).
func (c *engineChat) lock(on func(engine.Event)) {
	if c.mu.TryLock() {
		return
	}
	if c.srv.Load() != nil {
		phase(on, WaitingForServer)
	}
	c.mu.Lock()
}

// Open loads the model (once). It says what it does while it loads, and
// nothing when it is done: the turn that follows says what comes next (a
// "ready" between them read as idle while the prompt was read, N2).
func (c *engineChat) Open(ctx context.Context, on func(engine.Event)) (ModelInfo, error) {
	c.lock(on)
	defer c.mu.Unlock()
	if c.e != nil {
		return c.info, nil
	}
	dir := c.s.ModelDir
	if dir == "" {
		return ModelInfo{}, errors.New("no model folder is set: run the setup wizard and choose one")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return ModelInfo{}, fmt.Errorf("the tokenizer in %s could not be read (%v); the checkpoint folder needs tiktoken.model and tokenizer_config.json", dir, err)
	}
	var memp *plan.Memory
	if mem, err := doctor.ReadMemory(); err == nil {
		memp = &mem
	}
	phase(on, "loading the model")
	o := c.s.OpenOptions(memp)
	if c.tune != nil {
		c.tune(&o)
	}
	o.Progress = func(done, total int) { phase(on, fmt.Sprintf("loading layer %d/%d", done, total)) }
	heap := plan.LowHeap() // the engine samples the process base with the heap at its live size (plan.RuntimeOverhead)
	m, err := engine.Open(dir, o)
	if err != nil && o.Draft != "" {
		// a draft model that does not fit (another model's, too large for
		// the plan) only costs speed: run without it
		o.Draft = ""
		m, err = engine.Open(dir, o)
	}
	if err != nil {
		return ModelInfo{}, err
	}
	e := m.NewEngine(c.s.Threads)
	c.tok, c.m, c.e, c.opened, c.planned = tok, m, e, o, o.Positions
	c.sess = chat.NewSession(e, tok)
	c.sess.FitBudget(o)
	if pc := openPromptCache(m, o); pc != nil {
		c.sess.Cache, c.cache = pc, pc
	}
	name := filepath.Base(dir)
	if c.s.Demo || synth.IsDemo(dir) {
		name = "DEMO model (random weights: the text is not meaningful)"
		if synth.IsTrainedDemo(dir) {
			name = "DEMO model (a tiny Kimi K3 trained on sayings and drawings)"
		}
	}
	note := "DEMO: random weights, the text is not meaningful"
	if synth.IsTrainedDemo(dir) {
		note = "DEMO: 2.1 million parameters trained on fortune cookies and drawings; it knows sayings and coloured shapes and little else"
	}
	wanted := DraftBeside(dir) != ""
	if m.DraftModel() != nil {
		name += " with draft model"
	}
	c.info = ModelInfo{Name: name, Demo: c.s.Demo || synth.IsDemo(dir), DemoNote: note, Layers: m.Bound, BudgetBytes: m.Plan.Total + plan.RuntimeOverhead(heap, m.Plan.EngineHeap(o.TrunkDir != "")), Plan: m.Plan.String(),
		Context: c.s.Positions(), Draft: draftNote(m, wanted)}
	if vc, err := m.VisionChecked(); err == nil {
		c.info.Vision = vc
	}
	c.planBytes.Store(c.info.BudgetBytes)
	on(engine.Event{Kind: engine.EventStats, Stats: e.Snapshot(), At: time.Now()})
	return c.info, nil
}

func (c *engineChat) Close() {
	c.StopServer()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.e != nil {
		c.e.Close()
		c.m.Close()
		c.e, c.m, c.sess, c.cache = nil, nil, nil, nil
	}
}

// Turn runs one reply on the engine's chat session (chat.Session.Reply).
// The session keeps the engine state and reuses it when the conversation
// continues what was fed (and re-reads the prompt otherwise), so the
// history passed in is the truth: edits, regenerations and conversation
// switches just work.
func (c *engineChat) Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (Reply, error) {
	clock := newThinkClock(&on)
	if _, err := c.Open(ctx, on); err != nil {
		return Reply{}, err
	}
	c.lock(on)
	defer c.mu.Unlock()
	if len(history) == 0 || history[len(history)-1].Role != "user" {
		return Reply{}, errors.New("the conversation must end with your message")
	}
	e := c.e
	// on is called from the poller below and from the turn: one at a time
	var onMu sync.Mutex
	caller := on
	on = func(ev engine.Event) {
		onMu.Lock()
		defer onMu.Unlock()
		caller(ev)
	}
	// gauges keep moving during long steps
	defer pollStats(e, on)()
	last := ""
	setPhase := func(p string) {
		if p != last {
			last = p
			phase(on, p)
		}
	}
	if c.noDraft.Load() && c.m.DraftModel() != nil {
		opt.Spec = engine.SpecOff // the box is unticked: plain decoding, the same answer
	}
	// from the start the status says what the turn does (N2): what the
	// prompt reading will take, before the first pass ends
	c.eta.Begin()
	if reused, total, err := c.sess.Pending(history, opt); err == nil {
		setPhase(c.eta.Phase(reused, total, reused, 0, time.Now()))
	}
	rep, err := c.sess.Reply(ctx, history, opt, func(ev engine.Event) {
		if p, ok := c.eta.Event(ev); ok {
			setPhase(p)
		}
		switch ev.Kind {
		case engine.EventReasoning:
			setPhase("thinking")
		case engine.EventAnswer:
			setPhase("writing")
		}
		on(ev)
	})
	c.rateMu.Lock()
	c.passSec, c.passChunk = c.eta.PassSeconds, c.eta.Chunk
	c.rateMu.Unlock()
	if rep == nil {
		return Reply{}, err
	}
	msg := rep.Message()
	msg.Stats = clock.stats(len(rep.IDs), rep.FirstTokenSeconds, rep.SecondsPerToken)
	return Reply{Message: msg, Positions: rep.Reused + rep.Prefilled + len(rep.IDs)}, err
}
