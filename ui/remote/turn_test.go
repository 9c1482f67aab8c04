package remote

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/openai"
)

// TestTurnReaderAssemblesChunks: the turn reader, fed chunks directly,
// keeps reasoning and answer apart, assembles tool calls from deltas by
// their index (given out of order), shows them in index order, and counts
// a delta per text piece.
func TestTurnReaderAssemblesChunks(t *testing.T) {
	var evs []engine.Event
	tr := newTurnReader(&Client{}, chat.Options{}, func(e engine.Event) { evs = append(evs, e) })
	str := func(s string) *string { return &s }
	idx := func(i int) *int { return &i }
	stop := "tool_calls"
	for _, ch := range []openai.ChatChunk{
		{Choices: []openai.ChunkChoice{{Delta: openai.Delta{ReasoningContent: str("think")}}}},
		{Choices: []openai.ChunkChoice{{Delta: openai.Delta{Content: str("Hi")}}}},
		{Choices: []openai.ChunkChoice{{Delta: openai.Delta{ToolCalls: []openai.ToolCall{
			{Index: idx(1), ID: "c2", Function: openai.FunctionCall{Name: "b", Arguments: `{"y"`}},
			{Index: idx(0), ID: "c1", Function: openai.FunctionCall{Name: "a", Arguments: "{}"}}}}}}},
		{Choices: []openai.ChunkChoice{{Delta: openai.Delta{ToolCalls: []openai.ToolCall{
			{Index: idx(1), Function: openai.FunctionCall{Arguments: `:1}`}}}}, FinishReason: &stop}}},
	} {
		require.NoError(t, tr.chunk(&ch))
	}
	res, err := tr.finish(context.Background(), true, nil)
	require.NoError(t, err)
	assert.Equal(t, "think", res.Message.ReasoningContent)
	require.Len(t, res.ToolCalls, 2)
	assert.Equal(t, "c1", res.ToolCalls[0].ID)
	assert.Equal(t, "a", res.ToolCalls[0].Function.Name)
	assert.Equal(t, "c2", res.ToolCalls[1].ID)
	assert.Equal(t, `{"y":1}`, res.ToolCalls[1].Function.Arguments)
	assert.Equal(t, "Hi"+ToolCallText(res.ToolCalls[0])+ToolCallText(res.ToolCalls[1]), res.Message.Content)
	assert.Equal(t, "tool_calls", res.Finish)
	assert.Equal(t, 2, res.Deltas)
	assert.Equal(t, chat.Cut(""), res.Message.Cut)
	tokens := 0
	for _, e := range evs {
		if e.Kind == engine.EventToken {
			tokens++
		}
	}
	assert.Equal(t, 2, tokens)
}

// TestTurnReaderCaps: a chunk past the byte cap is refused with the cap's
// error, and the reply read so far comes back cut at the cap.
func TestTurnReaderCaps(t *testing.T) {
	tr := newTurnReader(&Client{MaxReplyBytes: 4}, chat.Options{}, func(engine.Event) {})
	s := "abc"
	require.NoError(t, tr.chunk(&openai.ChatChunk{Choices: []openai.ChunkChoice{{Delta: openai.Delta{Content: &s}}}}))
	err := tr.chunk(&openai.ChatChunk{Choices: []openai.ChunkChoice{{Delta: openai.Delta{Content: &s}}}})
	require.Error(t, err)
	res, ferr := tr.finish(context.Background(), false, err)
	assert.Equal(t, err, ferr)
	assert.Equal(t, "abc", res.Message.Content)
	assert.Equal(t, chat.CutTurnCap, res.Message.Cut)
}
