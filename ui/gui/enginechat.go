package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/engine/synth"
	st "k3/storage/safetensors"
	"k3/tokenizer"
)

// engineChat is the app's chat engine: the in-process engine and a
// chat.Session over it (the same session `k3 chat` drives).
type engineChat struct {
	s Settings

	mu   sync.Mutex
	tok  *tokenizer.Tokenizer
	m    *engine.Model
	set  *st.Set
	e    *engine.Engine
	sess *chat.Session
	info ModelInfo
}

// ContextPositions is the context the memory plan reserves for a chat.
const ContextPositions = 4096

// NewEngineChat returns a chat engine for the model the settings name.
func NewEngineChat(s Settings) ChatEngine { return &engineChat{s: s} }

// Budget turns the memory settings into the engine's budget.
func (s Settings) Budget(mem *plan.Memory) engine.Budget {
	t, c := s.TrunkGB, s.CacheGB
	if t <= 0 && c <= 0 {
		t, c = presetBudget(s.Preset, mem)
	}
	return engine.Budget{TrunkBytes: int64(t * plan.GB), CacheBytes: int64(c * plan.GB), Ring: 2,
		Positions: ContextPositions, Chunk: 64, Streaming: s.TrunkDir != ""}
}

// presetBudget returns a preset's budgets in GB ("auto" from memory).
func presetBudget(name string, mem *plan.Memory) (trunkGB, cacheGB float64) {
	if p, ok := plan.Lookup(name); ok {
		return p.TrunkGB, p.CacheGB
	}
	if mem != nil {
		if t, c, err := plan.Auto(*mem, 0); err == nil {
			return t, c
		}
	}
	p := plan.Presets[1] // laptop
	return p.TrunkGB, p.CacheGB
}

func (c *engineChat) Open(ctx context.Context, on func(ChatEvent)) (ModelInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.e != nil {
		return c.info, nil
	}
	dir := c.s.ModelDir
	if dir == "" {
		return ModelInfo{}, errors.New("no model folder is set: run the setup wizard (Model menu > Setup wizard) and choose one")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return ModelInfo{}, fmt.Errorf("the tokenizer in %s could not be read (%v); the checkpoint folder needs tiktoken.model and tokenizer_config.json", dir, err)
	}
	var memp *plan.Memory
	if mem, err := plan.ReadMemory(); err == nil {
		memp = &mem
	}
	on(ChatEvent{Kind: EvPhase, Phase: "loading the model", At: time.Now()})
	m, set, p, err := engine.OpenModel(dir, engine.OpenOptions{Layers: c.s.Layers, TrunkDir: c.s.TrunkDir,
		Memory: memp, Budget: c.s.Budget(memp),
		Progress: func(done, total int) {
			on(ChatEvent{Kind: EvPhase, Phase: fmt.Sprintf("loading layer %d/%d", done, total), At: time.Now()})
		}})
	if err != nil {
		return ModelInfo{}, err
	}
	e, err := engine.NewEngineFor(m, c.s.Threads)
	if err != nil {
		set.Close()
		return ModelInfo{}, err
	}
	c.tok, c.m, c.set, c.e = tok, m, set, e
	c.sess = chat.NewSession(e, tok)
	name := filepath.Base(dir)
	if c.s.Demo || synth.IsDemo(dir) {
		name = "DEMO model (random weights: the text is not meaningful)"
	}
	c.info = ModelInfo{Name: name, Demo: c.s.Demo || synth.IsDemo(dir), Layers: m.Bound, BudgetBytes: p.Total, Plan: p.String()}
	on(ChatEvent{Kind: EvStats, Stats: e.Snapshot(), At: time.Now()})
	on(ChatEvent{Kind: EvPhase, Phase: "ready", At: time.Now()})
	return c.info, nil
}

func (c *engineChat) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.e != nil {
		c.e.Close()
		c.m.Close()
		c.set.Close()
		c.e, c.set, c.m, c.sess = nil, nil, nil, nil
	}
}

// Turn runs one turn on the engine's chat session. The session keeps the
// engine state and reuses it when the conversation continues what was fed
// (and re-reads the prompt otherwise), so the history passed in is the
// truth: edits, regenerations and conversation switches just work.
func (c *engineChat) Turn(ctx context.Context, history []chat.Message, opt TurnOptions, on func(ChatEvent)) (chat.Message, error) {
	if _, err := c.Open(ctx, on); err != nil {
		return chat.Message{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(history) == 0 || history[len(history)-1].Role != "user" {
		return chat.Message{}, errors.New("the conversation must end with your message")
	}
	system := opt.System
	past := history[:len(history)-1]
	if len(past) > 0 && past[0].Role == "system" {
		system, past = past[0].Content, past[1:]
	}
	c.sess.History = slices.Clone(past)
	copt := chat.Options{System: strings.TrimSpace(system), NoThink: !opt.Thinking, Effort: opt.Effort,
		Greedy: opt.Greedy || opt.Temperature <= 0, Temperature: opt.Temperature, TopP: opt.TopP, TopK: opt.TopK,
		Seed: uint64(opt.Seed), MaxTokens: opt.MaxTokens}
	e := c.e
	// gauges keep moving during long steps
	pollDone := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-pollDone:
				return
			case now := <-t.C:
				on(ChatEvent{Kind: EvStats, Stats: e.Snapshot(), At: now})
			}
		}
	}()
	defer func() { close(pollDone); pollWG.Wait() }()
	phase := ""
	setPhase := func(p string) {
		if p != phase {
			phase = p
			on(ChatEvent{Kind: EvPhase, Phase: p, At: time.Now()})
		}
	}
	rep, err := c.sess.Turn(ctx, history[len(history)-1].Content, copt, func(ev chat.Event) {
		now := time.Now()
		switch ev.Kind {
		case chat.EventPrefill:
			setPhase(fmt.Sprintf("reading prompt %d/%d", ev.Done, ev.Total))
			on(ChatEvent{Kind: EvStats, Stats: ev.Stats, At: now})
		case chat.EventReasoning:
			setPhase("thinking")
			on(ChatEvent{Kind: EvReasoning, Text: ev.Text, At: now})
		case chat.EventAnswer:
			setPhase("answering")
			on(ChatEvent{Kind: EvAnswer, Text: ev.Text, At: now})
		case chat.EventToken:
			on(ChatEvent{Kind: EvToken, Seconds: ev.Seconds, Stats: ev.Stats, At: now})
		}
	})
	if rep == nil {
		return chat.Message{}, err
	}
	msg := chat.Message{Role: "assistant", Content: rep.Content, ReasoningContent: rep.Reasoning, Cut: rep.Cut}
	return msg, err
}
