package chat

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
)

// A turn held to JSON (Options.ResponseFormat) decodes without drafts even
// when drafting is forced, and its answer is a JSON object, greedy and
// seeded; the same turn free drafts (so the count sees drafts).
func TestStructuredTurnDraftsNothing(t *testing.T) {
	e, tok := demo(t)
	long := "say it again and again: the cat sat on the mat, the cat sat on the mat, the cat sat on the mat"
	free := Options{MaxTokens: 48, Spec: 4, Sampling: engine.Sampling{Greedy: true}}
	before := e.Snapshot().SpecDrafted
	_, err := NewSession(e, tok).Turn(context.Background(), long, free, nil)
	require.NoError(t, err)
	assert.Positive(t, e.Snapshot().SpecDrafted-before, "a forced free turn drafts")

	for _, sm := range []engine.Sampling{{Greedy: true}, {Temperature: 1, Seed: 4}} {
		opt := free
		opt.Sampling, opt.ResponseFormat = sm, json.RawMessage(`{"type":"json_object"}`)
		before = e.Snapshot().SpecDrafted
		rep, err := NewSession(e, tok).Turn(context.Background(), long, opt, nil)
		require.NoError(t, err)
		assert.Zero(t, e.Snapshot().SpecDrafted-before, "no drafts while held to JSON")
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(rep.Content), &v), "%q", rep.Content)
	}
}

// A strict schema outside the enforced subset fails the turn before it
// starts: the history is left as it was.
func TestStructuredTurnRefused(t *testing.T) {
	e, tok := demo(t)
	s := NewSession(e, tok)
	opt := Options{MaxTokens: 8, ResponseFormat: json.RawMessage(
		`{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"array","uniqueItems":true}}}`)}
	_, err := s.Turn(context.Background(), "hi", opt, nil)
	require.ErrorContains(t, err, "cannot be enforced")
	assert.Empty(t, s.History())
}
