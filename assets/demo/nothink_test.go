package demo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/tokenizer"
)

// TestNoThinkStillThinksFirst pins down issue 27's G28 ("…has the word work
// in it.The sheep that fly…" with Thinking off): the prompt with thinking
// off opens the response channel as the reference template does, and the
// demo model — trained only on conversations rendered with thinking on —
// writes its thought anyway, then closes a think channel that was never
// opened and opens the response channel again. The reply reader leaves
// those two markers out (saying so), so the thought runs into the answer.
// It is the model's training, not the prompt nor the reader.
func TestNoThinkStillThinksFirst(t *testing.T) {
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 1)
	user := "Do you know a saying about work?"
	opt := chat.Options{Sampling: engine.Sampling{Greedy: true}}
	s := chat.NewSession(e, tok)
	prompt, err := s.Prompt(user, opt)
	require.NoError(t, err)
	open, _ := tok.SpecialID(tokenizer.Open)
	require.GreaterOrEqual(t, len(prompt), 3)
	assert.Equal(t, open, prompt[len(prompt)-3], "the prompt ends opening a channel")
	assert.Equal(t, "response", string(tok.Decode(prompt[len(prompt)-2:len(prompt)-1])), "the response channel, as the reference renders thinking=False")

	r, err := s.Turn(context.Background(), user, opt, nil)
	require.NoError(t, err)
	assert.Equal(t, "", r.Reasoning)
	assert.Equal(t, "The user asks for a saying about work. I know one that mentions work.Work is the crab grass in the lawn of life.", r.Content)
	assert.Equal(t, []string{"a stray <|close|>think<|sep|> was left out",
		"a response channel opened inside the response channel was left out"}, r.Warnings)
}
