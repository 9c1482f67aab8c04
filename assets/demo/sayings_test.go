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
	"k3/internal/drawings"
)

// pictureAnswer is a colour followed by a shape: how the demo names a
// picture ("A blue triangle.").
var pictureAnswer = regexp.MustCompile(`(?i)\b(` + strings.Join(drawings.ColourNames, "|") + `)\s+(` +
	strings.Join(drawings.Shapes, "|") + `)\b`)

// TestDemoSayingsAreNotPictures: greedy replies to text-only saying prompts,
// thinking on and off, are never picture answers. The first demo that saw
// (train_vision.py with the sayings' loss weighted as the pictures') answered
// "Tell me a saying about work." with thinking on "A blue triangle.", and the
// demo's greeting suggests exactly that word. train_vision.py checks the same
// on the float reference over 40 words.
func TestDemoSayingsAreNotPictures(t *testing.T) {
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 2)
	words := []string{"work", "time", "love", "life", "money", "friends", "truth", "music", "food", "war",
		"peace", "patience", "people", "world", "death", "power", "mind", "heart", "home", "family",
		"knowledge", "computer", "success", "freedom"}
	for _, thinking := range []bool{true, false} {
		for _, w := range words {
			user := "Tell me a saying about " + w + "."
			s := chat.NewSession(e, tok)
			r, err := s.Turn(context.Background(), user, chat.Options{Thinking: thinking, Sampling: engine.Sampling{Greedy: true}}, nil)
			require.NoError(t, err)
			t.Logf("thinking %-5v %q -> %q", thinking, user, r.Content)
			assert.NotEmpty(t, strings.TrimSpace(r.Content), "%q thinking %v", user, thinking)
			assert.False(t, pictureAnswer.MatchString(r.Content), "%q thinking %v: a picture answer: %q", user, thinking, r.Content)
		}
	}
}
