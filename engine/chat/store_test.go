package chat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/storage/filelock"
)

func TestTitleFrom(t *testing.T) {
	assert.Equal(t, "Hello, who are you?", TitleFrom("  Hello, who are you?\nsecond line"))
	assert.Equal(t, "Plan a three-day walk in the Alps with huts and…",
		TitleFrom("Plan a three-day walk in the Alps with huts and trains from Zurich, please"))
}

func TestConversationsOptionsSearchExport(t *testing.T) {
	c := Store{Dir: t.TempDir()}
	a, err := c.New("Conversation 2026-12-01 08.05")
	require.NoError(t, err)
	b, err := c.New("Conversation 2026-12-01 08.05")
	require.NoError(t, err)
	assert.Equal(t, "Conversation 2026-12-01 08.05 2", b)
	require.NoError(t, c.Save(a, []Message{{Role: "user", Content: "Where do penguins live?"},
		{Role: "assistant", Content: "In the south.", ReasoningContent: "Antarctica", Cut: CutStopped}}))

	o := Options{Thinking: false, Effort: "low", MaxTokens: 99, Sampling: engine.Sampling{Temperature: 0.7, Seed: 5}}
	require.NoError(t, c.SaveOptions(a, o))
	got, ok, err := c.LoadOptions(a)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, o, got)
	_, ok, err = c.LoadOptions(b)
	require.NoError(t, err)
	assert.False(t, ok)

	found, err := c.Search("PENGUIN")
	require.NoError(t, err)
	assert.Equal(t, []string{a}, found)
	found, err = c.Search("antarctica")
	require.NoError(t, err)
	assert.Equal(t, []string{a}, found, "thinking is searched too")

	renamed, err := c.Rename(a, "ships/boats: a?b")
	var re *RenamedError
	require.True(t, errors.As(err, &re), "a changed name is said: %v", err)
	assert.Equal(t, "ships-boats- a?b", renamed)
	got, ok, err = c.LoadOptions(renamed)
	require.NoError(t, err)
	assert.True(t, ok, "the settings follow the rename")
	assert.Equal(t, o, got)

	h, err := c.Load(renamed)
	require.NoError(t, err)
	assert.Equal(t, "# T\n\n## You\n\nWhere do penguins live?\n\n## Kimi K3\n\n<details><summary>Thinking</summary>\n\nAntarctica\n\n</details>\n\nIn the south.\n\n*(stopped)*\n",
		Markdown("T", h))
	require.NoError(t, c.Delete(renamed))
	_, ok, _ = c.LoadOptions(renamed)
	assert.False(t, ok)
}

// Renaming and deleting conversations leave no lock files behind; both are
// refused while another k3 holds the conversation.
func TestConversationsLeaveNoLockFiles(t *testing.T) {
	c := Store{Dir: t.TempDir()}
	a, err := c.New("A")
	require.NoError(t, err)
	require.NoError(t, c.Save(a, []Message{{Role: "user", Content: "hi"}}))
	locks := func() []string {
		ents, err := os.ReadDir(c.Dir)
		require.NoError(t, err)
		var out []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".lock") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	b, err := c.Rename(a, "B")
	require.NoError(t, err)
	assert.Equal(t, []string{".B.jsonl.lock"}, locks())

	other, err := filelock.TryLock(filepath.Join(c.Dir, ".B.jsonl.lock")) // another process
	require.NoError(t, err)
	_, err = c.Rename(b, "C")
	assert.EqualError(t, err, `"B" is open in another k3 (a chat or another window): close it there, then rename it`)
	assert.Error(t, c.Delete(b))
	_, err = c.Hold(b)
	assert.ErrorIs(t, err, ErrHistoryInUse)
	other.Unlock()

	l, err := c.Hold(b)
	require.NoError(t, err)
	require.NoError(t, c.Delete(b), "the holder may delete it")
	l.Release()
	assert.Empty(t, locks())
	titles, err := c.List()
	require.NoError(t, err)
	assert.Empty(t, titles)
}

func TestIsAutoTitle(t *testing.T) {
	msg := "Plan a three-day walk in the Alps with huts and trains from Zurich, please"
	assert.True(t, IsAutoTitle("Plan a three-day walk in the Alps with huts and…", msg))
	assert.True(t, IsAutoTitle("Plan a three-day walk in the Alps with huts and… 2", msg), "numbered beside another conversation's")
	assert.True(t, IsAutoTitle("a-b - c", "a/b : c\nmore"), "as a file name")
	for _, title := range []string{"Alps trip", "Plan a three-day walk in the Alps with huts and… two",
		"Plan a three-day walk in the Alps with huts and…2", "Plan a three-day walk in the Alps with huts and… 02",
		"Plan a three-day walk in the Alps with huts and… ", "Plan a three-day walk"} {
		assert.False(t, IsAutoTitle(title, msg), title)
	}
	assert.False(t, IsAutoTitle("x", "   "), "an empty message gives no title")
}

// A conversation's settings file as an older k3 wrote it (ConvOptions,
// thinking stored as "thinking") reads into Options with the same
// choice, and is written back with the same keys, so either k3 reads what
// the other wrote.
func TestConversationOptionsOldFile(t *testing.T) {
	c := Store{Dir: t.TempDir()}
	old := `{
  "thinking": false,
  "effort": "low",
  "max_tokens": 99,
  "sampling": {
    "Greedy": true,
    "Temperature": 0.7,
    "TopK": 0,
    "TopP": 0.9,
    "Seed": 5
  }
}`
	require.NoError(t, os.WriteFile(c.optionsPath("Old"), []byte(old), 0o600))
	got, ok, err := c.LoadOptions("Old")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, Options{Thinking: false, Effort: "low", MaxTokens: 99,
		Sampling: engine.Sampling{Greedy: true, Temperature: 0.7, TopP: 0.9, Seed: 5}}, got)
	require.NoError(t, c.SaveOptions("Old", got))
	raw, err := os.ReadFile(c.optionsPath("Old"))
	require.NoError(t, err)
	assert.JSONEq(t, old, string(raw), "the same keys: no system prompt, no speculative decoding")

	require.NoError(t, os.WriteFile(c.optionsPath("On"), []byte(`{"thinking": true, "effort": "max", "max_tokens": 4096, "sampling": {"Greedy": true}}`), 0o600))
	got, _, err = c.LoadOptions("On")
	require.NoError(t, err)
	assert.True(t, got.Thinking, "thinking on stays on")
	assert.Equal(t, "max", got.Effort)
}
