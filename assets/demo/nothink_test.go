package demo_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/tokenizer"
)

// glued is a sentence end run into the next sentence with no space: what
// issue 27/41's G28 saw with Thinking off ("…mentions work.Work is the crab
// grass in the lawn of life.").
var glued = regexp.MustCompile(`[a-z][.!?][A-Z]`)

// thought holds the demo's thinking sentences (tools/demo/corpus.py THINK,
// THINK_ANY and the canned exchanges' thoughts).
var thought = regexp.MustCompile(`The user (asks|wants|says)|I know one that mentions|I will (give|pick|choose) |` +
	`I remember a saying|will do\. I will|A short saying that mentions|I should (greet|say what)`)

// TestNoThinkAnswersDirectly is G28's test: with thinking off the prompt
// opens the response channel as the reference template does, and the demo
// (trained on thinking-off conversations too, tools/demo/train_vision.py)
// answers at once: no thought sentence, none glued to the answer, no stray
// think markers for the reply reader to drop, and the reply ends by itself.
func TestNoThinkAnswersDirectly(t *testing.T) {
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 2)
	opt := chat.Options{Sampling: engine.Sampling{Greedy: true}}
	open, _ := tok.SpecialID(tokenizer.Open)
	for _, user := range []string{"Tell me a saying about work.", "Give me a saying about patience.",
		"Do you know a saying about work?", "Tell me a fortune.", "Hello!", "Who are you?", "Give me a fortune about time."} {
		s := chat.NewSession(e, tok)
		prompt, err := s.Prompt(user, opt)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(prompt), 3)
		assert.Equal(t, open, prompt[len(prompt)-3], "the prompt ends opening a channel")
		assert.Equal(t, "response", string(tok.Decode(prompt[len(prompt)-2:len(prompt)-1])), "the response channel, as the reference renders thinking=False")

		r, err := s.Turn(context.Background(), user, opt, nil)
		require.NoError(t, err)
		t.Logf("%q -> %q", user, r.Content)
		require.Equal(t, engine.StopToken, r.Stop, "%q: the reply did not end by itself", user)
		assert.Equal(t, "", r.Reasoning)
		assert.Empty(t, r.Warnings, "%q: the model wrote think markers", user)
		assert.NotEmpty(t, strings.TrimSpace(r.Content), "%q", user)
		assert.False(t, glued.MatchString(r.Content), "%q: a sentence glued to the next: %q", user, r.Content)
		assert.False(t, thought.MatchString(r.Content), "%q: a thought in the answer: %q", user, r.Content)
	}
}
