package chat

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/promptcache"
)

// TestSecondProcessReadsOnlyTheTail: a session in another process (a
// cache opened again on the same folder) with the same system prompt
// resumes from the snapshot at the end of the system block, says how much
// it reused, and replies exactly as a session without the cache.
func TestSecondProcessReadsOnlyTheTail(t *testing.T) {
	e, tok := demo(t)
	dir := t.TempDir()
	opt := Options{System: strings.Repeat("You are a careful assistant. ", 6), MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}}
	open := func() *promptcache.Cache {
		c, err := promptcache.Open(e.Model(), promptcache.Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30})
		require.NoError(t, err)
		return c
	}
	first := NewSession(e, tok)
	first.Cache = open()
	_, err := first.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)

	system, _, err := NewSession(e, tok).render([]Message{{Role: "system", Content: opt.System}}, opt, true)
	require.NoError(t, err)
	second := NewSession(e, tok)
	second.Cache = open()
	var last engine.Event
	got, err := second.Turn(context.Background(), "What is the time?", opt, func(ev engine.Event) {
		if ev.Kind == engine.EventPrefill {
			last = ev
		}
	})
	require.NoError(t, err)
	prompt, err := NewSession(e, tok).Prompt("What is the time?", opt)
	require.NoError(t, err)
	assert.Equal(t, len(system), got.Reused, "the system block came from the cache")
	assert.Equal(t, len(prompt)-len(system), got.Prefilled)
	assert.Equal(t, len(system), last.Reused)
	assert.Equal(t, len(prompt), last.Total)

	plain, err := NewSession(e, tok).Turn(context.Background(), "What is the time?", opt, nil)
	require.NoError(t, err)
	assert.Zero(t, plain.Reused)
	assert.Equal(t, plain.IDs, got.IDs)
}

// TestPartitionsDoNotShareKeptState: a transcript of another partition
// reuses neither the session's kept states nor the cache's snapshots.
func TestPartitionsDoNotShareKeptState(t *testing.T) {
	e, tok := demo(t)
	c, err := promptcache.Open(e.Model(), promptcache.Options{RAMBytes: 1 << 30})
	require.NoError(t, err)
	s := NewSession(e, tok)
	s.Cache = c
	ids, err := s.Prompt("Hello there, how are you today?", Options{})
	require.NoError(t, err)
	o := PromptOptions{MaxTokens: 3, Partition: "a"}
	_, err = s.Generate(context.Background(), ids, o, nil)
	require.NoError(t, err)
	again, err := s.Generate(context.Background(), ids, o, nil)
	require.NoError(t, err)
	assert.Equal(t, len(ids)-1, again.Reused)
	o.Partition = "b"
	other, err := s.Generate(context.Background(), ids, o, nil)
	require.NoError(t, err)
	assert.Zero(t, other.Reused)
	assert.Equal(t, again.IDs, other.IDs)
}
