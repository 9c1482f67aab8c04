package bridge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/promptcache"
)

// The package's tests keep out of the user's prompt cache; those that use
// one set $K3_PROMPT_CACHE to a folder of their own.
func init() { os.Setenv(promptcache.Env, "off") }

// TestNewConversationStartsFromTheSavedPreamble: in a restarted app (a new
// engine chat on the same cache folder), a new conversation reads only
// its own question: the preamble comes from the prompt cache, the prefill
// events say how much ("reused N of M"), and the reply is the one read
// without the cache. The Settings' size and Clear see the saved prompts.
func TestNewConversationStartsFromTheSavedPreamble(t *testing.T) {
	cacheDir := filepath.Join(t.TempDir(), "prompts")
	t.Setenv(promptcache.Env, cacheDir)
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.Preset, s.MaxTokens = dir, true, "laptop", 8
	opt := s.ConvDefaults()
	ctx := context.Background()
	first := NewEngineChat(s)
	_, err := first.Turn(ctx, []chat.Message{{Role: "user", Content: "Tell me a saying about love."}}, opt, func(engine.Event) {})
	require.NoError(t, err)
	first.Close()
	files, bytes := PromptCacheSize()
	assert.Positive(t, files)
	assert.Positive(t, bytes)

	var last engine.Event
	again := NewEngineChat(s)
	defer again.Close()
	q := []chat.Message{{Role: "user", Content: "And one about the sea."}}
	got, err := again.Turn(ctx, q, opt, func(ev engine.Event) {
		if ev.Kind == engine.EventPrefill {
			last = ev
		}
	})
	require.NoError(t, err)
	assert.Positive(t, last.Reused, "the preamble came from the cache")
	assert.Less(t, last.Reused, last.Total)

	t.Setenv(promptcache.Env, "off")
	plain := NewEngineChat(s)
	defer plain.Close()
	want, err := plain.Turn(ctx, q, opt, func(engine.Event) {})
	require.NoError(t, err)
	want.Stats, got.Stats = nil, nil // the timings differ from run to run
	assert.Equal(t, want.Message, got.Message)

	t.Setenv(promptcache.Env, cacheDir)
	require.NoError(t, ClearPromptCache())
	files, bytes = PromptCacheSize()
	assert.Zero(t, files)
	assert.Zero(t, bytes)

}
