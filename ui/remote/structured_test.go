package remote

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/fixture"
	"k3/tokenizer/constrain"
)

// Against k3 serve on the demo model (random weights: left alone it
// writes no JSON), the client's response_format comes back as
// schema-valid JSON, greedy and seeded, thinking on and off.
func TestRemoteResponseFormat(t *testing.T) {
	s, _, _ := k3Serve(t)
	c, err := New("http://"+s.Addr(), "key", "")
	require.NoError(t, err)
	hist := []chat.Message{{Role: "user", Content: "who?"}}
	n := 0
	for _, noThink := range []bool{true, false} {
		for _, sm := range []engine.Sampling{{Greedy: true}, {Temperature: 1, Seed: 3}, {Temperature: 1.5, Seed: 9}} {
			opt := chat.Options{Thinking: !noThink, MaxTokens: 80, Sampling: sm,
				ResponseFormat: constrain.SchemaFormat("person", json.RawMessage(fixture.PersonSchema))}
			res, err := c.Turn(context.Background(), hist, opt, nil)
			require.NoError(t, err)
			assert.Equal(t, "stop", res.Finish)
			fixture.CheckPerson(t, res.Message.Content, false)
			n++
		}
	}
	assert.Equal(t, 6, n)
	res, err := c.Turn(context.Background(), hist, chat.Options{MaxTokens: 40, ResponseFormat: constrain.ObjectFormat}, nil)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Message.Content), &obj), res.Message.Content)
}

// The client's tools and tool_choice (required, named) come back as one
// call whose arguments fit the tool's schema.
func TestRemoteToolChoice(t *testing.T) {
	s, _, _ := k3Serve(t)
	c, err := New("http://"+s.Addr(), "key", "")
	require.NoError(t, err)
	tool := func(name string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]any{"name": name,
			"parameters": json.RawMessage(fixture.PersonSchema)}})
		return b
	}
	c.Tools = []json.RawMessage{tool("lookup"), tool("store")}
	hist := []chat.Message{{Role: "user", Content: "find Ann"}}
	for _, tc := range []struct {
		choice string
		names  []string
	}{
		{`"required"`, []string{"lookup", "store"}},
		{`{"type":"function","function":{"name":"store"}}`, []string{"store"}},
	} {
		c.ToolChoice = json.RawMessage(tc.choice)
		for _, sm := range []engine.Sampling{{Greedy: true}, {Temperature: 1, Seed: 5}} {
			res, err := c.Turn(context.Background(), hist, chat.Options{MaxTokens: 120, Sampling: sm}, nil)
			require.NoError(t, err)
			assert.Equal(t, "tool_calls", res.Finish, tc.choice)
			require.Len(t, res.ToolCalls, 1, tc.choice)
			assert.Contains(t, tc.names, res.ToolCalls[0].Function.Name)
			fixture.CheckPerson(t, res.ToolCalls[0].Function.Arguments, false)
		}
	}
}
