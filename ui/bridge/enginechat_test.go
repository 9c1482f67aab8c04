package bridge

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// Editing an earlier question in the app and sending it again reuses the
// engine state from just before that question (the chat session's
// checkpoint): only the edited question is read. The reply is the one an
// engine reading the whole conversation from scratch writes.
func TestEngineChatEditReusesTheState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.Preset, s.MaxTokens = dir, true, "laptop", 120
	opt := s.ConvDefaults()
	ctx := context.Background()
	none := func(engine.Event) {}

	c := NewEngineChat(s)
	defer c.Close()
	h := []chat.Message{{Role: "user", Content: "Tell me a saying about love."}}
	r, err := c.Turn(ctx, h, opt, none)
	require.NoError(t, err)
	h = append(h, r.Message, chat.Message{Role: "user", Content: "And one about work."})
	r, err = c.Turn(ctx, h, opt, none)
	require.NoError(t, err)
	h = append(h, r.Message)

	// the second question, edited
	edited := append(slices.Clone(h[:2]), chat.Message{Role: "user", Content: "And one about the sea."})
	prefill := func(last *engine.Event) func(engine.Event) {
		return func(ev engine.Event) {
			if ev.Kind == engine.EventPrefill {
				*last = ev
			}
		}
	}
	var mine, theirs engine.Event
	got, err := c.Turn(ctx, edited, opt, prefill(&mine))
	require.NoError(t, err)

	fresh := NewEngineChat(s)
	defer fresh.Close()
	want, err := fresh.Turn(ctx, edited, opt, prefill(&theirs))
	require.NoError(t, err)
	require.NotNil(t, got.Stats)
	assert.Equal(t, want.Stats.Tokens, got.Stats.Tokens)
	want.Stats, got.Stats = nil, nil // the timings differ from run to run
	assert.Equal(t, want.Message, got.Message, "the same reply as reading it all")
	assert.NotEmpty(t, got.Content)

	// where the edited question starts in the transcript
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	var msgs []xtml.Message
	for _, m := range edited[:2] {
		msgs = append(msgs, xtml.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent})
	}
	segs, err := xtml.Render(msgs, nil, xtml.RenderOptions{NoThink: !opt.Thinking, ThinkingEffort: opt.Effort, NoGenerationPrompt: true})
	require.NoError(t, err)
	start := len(xtml.Encode(tok, segs))
	assert.Zero(t, theirs.Reused)
	assert.Equal(t, start, mine.Reused, "everything before the edited question is reused")
	assert.Equal(t, theirs.Total, mine.Total)
	t.Logf("read %d of %d positions instead of %d", mine.Total-mine.Reused, mine.Total, theirs.Total)
}

// The plan the gauges show counts the Go heap's swing: with a
// toolkit-sized live heap (40 MB, as the window's) and garbage made all the
// time, as drawing makes it, a demo chat stays within it (it was 10-15 MB
// above the plan in the app); memory the plan does not know of is still
// reported above it. Both with the layers read from the shards and from a
// packed trunk.
func TestEngineChatPlanHoldsTheHeapSwing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not the plan's to hold")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	packed := filepath.Join(t.TempDir(), "trunk")
	require.NoError(t, trunkPacker{}.Pack(t.Context(), dir, packed, 0, PackOptions{}, nil))
	toolkit := make([][]byte, 40)
	for i := range toolkit {
		toolkit[i] = bytes.Repeat([]byte{1}, 1<<20)
	}
	for _, trunkDir := range []string{packed, ""} {
		s := DefaultSettings()
		s.ModelDir, s.TrunkDir, s.Demo, s.MaxTokens = dir, trunkDir, true, 120
		c := NewEngineChat(s).(*engineChat)
		var m Meter
		// garbage with every event, as the window makes it
		var sink []byte
		r, err := c.Turn(t.Context(), []chat.Message{{Role: "user", Content: "Tell me a saying about love."}}, s.ConvDefaults(),
			func(ev engine.Event) {
				sink = bytes.Repeat([]byte{2}, 64<<10)
				m.Stats(time.Now(), ev.Stats)
			})
		require.NoError(t, err)
		require.NotEmpty(t, r.Content)
		info, err := c.Open(t.Context(), func(engine.Event) {})
		require.NoError(t, err)
		m.SetLimits(info.BudgetBytes, 0)
		// and between turns, at 250 MB/s: the heap fills to its goal, over
		// and over
		for range 800 {
			sink = bytes.Repeat([]byte{3}, 256<<10)
			time.Sleep(time.Millisecond)
		}
		runtime.KeepAlive(sink)
		m.Stats(time.Now(), c.e.Snapshot())
		g := m.Gauges()
		t.Logf("trunk %q: peak in use %.1f MB, plan %.1f MB (the engine's %.1f MB and the heap's swing)", trunkDir, float64(g.PeakRSS)/1e6, float64(g.Budget)/1e6, float64(c.m.Plan.Total)/1e6)
		assert.Greater(t, g.PeakRSS, c.m.Plan.Total, "the engine's plan alone is exceeded: the test makes the app's garbage")
		assert.LessOrEqual(t, g.PeakRSS, g.Budget, "a normal demo chat stays within the plan")

		// 32 MB more than the plan allows, held and touched
		extra := make([]byte, max(g.Budget-g.RSS, 0)+32<<20)
		for i := 0; i < len(extra); i += 4096 {
			extra[i] = 1
		}
		m.Stats(time.Now(), c.e.Snapshot())
		g = m.Gauges()
		assert.Greater(t, g.RSS, g.Budget, "memory the plan does not know of is above it")
		runtime.KeepAlive(extra)
		c.Close()
	}
	runtime.KeepAlive(toolkit)
}

// The app uses the draft model it finds beside the model (the demo has
// one) unless the user turned it off; the replies are the same either way.
func TestEngineChatUsesTheDraftBeside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.Preset, s.MaxTokens = dir, true, "laptop", 40
	assert.Equal(t, filepath.Join(dir, "draft"), s.OpenOptions(nil).Draft)
	off := s
	off.NoDraft = true
	assert.Empty(t, off.OpenOptions(nil).Draft)
	assert.Empty(t, DraftBeside(t.TempDir()), "no draft folder")

	opt := s.ConvDefaults()
	h := []chat.Message{{Role: "user", Content: "Tell me a saying about time."}}
	reply := func(s Settings) string {
		c := NewEngineChat(s)
		defer c.Close()
		r, err := c.Turn(context.Background(), h, opt, func(engine.Event) {})
		require.NoError(t, err)
		return r.Message.Content
	}
	with := reply(s)
	assert.NotEmpty(t, with)
	assert.Equal(t, reply(off), with)
}

// Turn calls on from its gauge poller and from the turn itself, one call
// at a time (the callback need not be safe for concurrent calls).
func TestEngineChatCallsOnOneAtATime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.Preset, s.MaxTokens = dir, true, "laptop", 120
	c := NewEngineChat(s)
	defer c.Close()
	var inside atomic.Int32
	var overlaps, polls int
	_, err := c.Turn(t.Context(), []chat.Message{{Role: "user", Content: "Tell me a saying about work."}}, s.ConvDefaults(),
		func(ev engine.Event) {
			if inside.Add(1) != 1 {
				overlaps++
			}
			if ev.Kind == engine.EventStats {
				polls++
			}
			time.Sleep(3 * time.Millisecond) // a slow window: widens any overlap
			inside.Add(-1)
		})
	require.NoError(t, err)
	assert.Zero(t, overlaps)
	assert.Positive(t, polls, "the poller ran during the turn")
}
