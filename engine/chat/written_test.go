package chat

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/tokenizer"
)

// TestHistoryKeepsWhatTheModelWrote: a reply of random bytes (invalid
// UTF-8, cut by the reply cap inside the think channel) is saved, read
// back, and the next prompt feeds exactly the ids the model wrote after
// the first prompt, not the saved text (U+FFFD in place of each bad byte)
// encoded again.
func TestHistoryKeepsWhatTheModelWrote(t *testing.T) {
	e, tok := demo(t)
	opt := Options{Thinking: true, MaxTokens: 40, Sampling: engine.Sampling{Greedy: true}}
	s := NewSession(e, tok)
	s.HistoryPath = filepath.Join(t.TempDir(), "h.jsonl")
	first, err := s.Prompt("Hello there", opt)
	require.NoError(t, err)
	r, err := s.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)
	require.Len(t, r.IDs, 40)
	for _, id := range r.IDs {
		require.False(t, tok.IsSpecial(id), "the synthetic model wrote a control token: the case is not a plain cut reply")
	}
	require.False(t, utf8.Valid(tok.Decode(r.IDs)), "the case needs a reply with invalid UTF-8")

	h, err := LoadHistory(s.HistoryPath)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.True(t, utf8.ValidString(h[1].ReasoningContent), "the file keeps valid text")
	assert.Contains(t, h[1].ReasoningContent, "\uFFFD")

	next, err := NewSession(e, tok).withHistory(h).Prompt("And again?", opt)
	require.NoError(t, err)
	want := append(append([]int(nil), first...), r.IDs...)
	require.GreaterOrEqual(t, len(next), len(want))
	assert.Equal(t, want, next[:len(want)], "the next prompt re-uses the ids the model wrote")
	// and the same in the session that wrote them (nothing saved between)
	same, err := s.Prompt("And again?", opt)
	require.NoError(t, err)
	assert.Equal(t, next, same)
	// the state of the first turn is reused up to the last id written
	_, total, err := s.Pending(append(s.History(), Message{Role: "user", Content: "And again?"}), opt)
	require.NoError(t, err)
	assert.Equal(t, len(next), total)
}

// TestWrittenIDsPlainReplyOnly: a reply written plainly splits into its
// channels' ids; an edited text goes back to being encoded.
func TestWrittenIDsPlainReplyOnly(t *testing.T) {
	_, tok := demo(t)
	sp := func(name string) int { id, ok := tok.SpecialID(name); require.True(t, ok, name); return id }
	tag := func(ctl, name string) []int {
		return append(append([]int{sp(ctl)}, tok.Encode(name)...), sp(tokenizer.Sep))
	}
	think, answer := []int{200, 201, 202}, []int{65, 66}
	var gen []int
	gen = append(gen, think...)
	gen = append(gen, tag(tokenizer.Close, "think")...)
	gen = append(gen, tag(tokenizer.Open, "response")...)
	gen = append(gen, answer...)
	gen = append(gen, tag(tokenizer.Close, "response")...)
	gen = append(gen, tag(tokenizer.Close, "message")...)
	gen = append(gen, sp(tokenizer.EndOfMsg))
	w := writtenIDs(tok, gen, true)
	require.NotNil(t, w)
	assert.Equal(t, think, w.Reasoning)
	assert.Equal(t, answer, w.Content)
	// a tool section is not a plain reply
	assert.Nil(t, writtenIDs(tok, append(append([]int{}, answer...), tag(tokenizer.Open, "tools")...), false))

	m := Message{Role: "assistant", ReasoningContent: string(tok.Decode(think)), Content: "AB", Written: &Written{Reasoning: think, Content: []int{66, 65}}}
	s := NewSession(nil, tok)
	ids, _, err := s.render([]Message{{Role: "user", Content: "hi"}, m}, Options{Thinking: true}, true)
	require.NoError(t, err)
	assert.True(t, hasRun(ids, think), "the reasoning's ids as written")
	assert.True(t, hasRun(ids, tok.Encode("AB")), "ids that do not read as the text are not used")
	assert.False(t, hasRun(ids, []int{66, 65}))
}

func hasRun(ids, run []int) bool {
	for i := 0; i+len(run) <= len(ids); i++ {
		if slices.Equal(ids[i:i+len(run)], run) {
			return true
		}
	}
	return false
}
