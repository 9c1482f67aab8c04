package bridge

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
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
	opt := s.ConvDefaults().ChatOptions()
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
	assert.Equal(t, want.Message, got.Message, "the same reply as reading it all")
	assert.NotEmpty(t, got.Content)

	// where the edited question starts in the transcript
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	var msgs []tokenizer.Message
	for _, m := range edited[:2] {
		msgs = append(msgs, tokenizer.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent})
	}
	segs, err := tokenizer.Render(msgs, nil, tokenizer.RenderOptions{NoThink: opt.NoThink, ThinkingEffort: opt.Effort, NoGenerationPrompt: true})
	require.NoError(t, err)
	start := len(tok.EncodeSegments(segs))
	assert.Zero(t, theirs.Reused)
	assert.Equal(t, start, mine.Reused, "everything before the edited question is reused")
	assert.Equal(t, theirs.Total, mine.Total)
	t.Logf("read %d of %d positions instead of %d", mine.Total-mine.Reused, mine.Total, theirs.Total)
}
