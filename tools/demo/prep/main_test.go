package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"k3/doctor/bench"
	"k3/engine"
	"k3/engine/chat"
	"k3/internal/fixture"
	"k3/tokenizer"
)

// TestChatOptionsAreTheBenchs: the drafters learn from replies rendered and
// sampled as k3 bench spec's chat sessions are (thinking first). Generated
// with thinking off, the demo writes other replies than the bench measures.
func TestChatOptionsAreTheBenchs(t *testing.T) {
	tok, err := tokenizer.Load(fixture.ModelDir("demo"))
	require.NoError(t, err)
	greedy := chatOptions(turnsLine{Turns: []string{"Hi"}}, 64)
	require.Equal(t, bench.ChatOptions(engine.Sampling{}, 64), greedy)
	require.True(t, greedy.Thinking)
	seeded := chatOptions(turnsLine{Turns: []string{"Hi"}, Seed: 1003}, 64)
	require.Equal(t, engine.Sampling{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 1003}, seeded.Sampling)

	ids, err := chat.NewSession(nil, tok).Prompt("Hi", greedy)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(tok.Decode(ids)), "<|open|>think<|sep|>"), "the prompt opens the thinking channel")
}
