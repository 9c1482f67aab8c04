package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// toChat decodes a Messages request body and translates it.
func toChat(t *testing.T, body string) (openai.ChatRequest, *openai.Error) {
	t.Helper()
	var m MessagesRequest
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	return ToChat(&m)
}

func mustChat(t *testing.T, body string) openai.ChatRequest {
	t.Helper()
	q, err := toChat(t, body)
	require.Nil(t, err)
	return q
}

func ptr[T any](v T) *T { return &v }

// TestToChatConversation translates a conversation with every block a
// Messages client sends: system blocks one a line, thinking and tool_use in
// the assistant's turn, tool_result before the user's text.
func TestToChatConversation(t *testing.T) {
	q := mustChat(t, `{"model": "k3", "max_tokens": 64, "stream": true, "temperature": 0.5, "top_k": 4,
		"metadata": {"user_id": "u1"},
		"system": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "be kind"}],
		"messages": [
			{"role": "user", "content": "weather?"},
			{"role": "assistant", "content": [
				{"type": "thinking", "thinking": "look it up", "signature": ""},
				{"type": "redacted_thinking", "data": "x"},
				{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
				{"type": "tool_use", "id": "toolu_2", "name": "time"}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "rain"}]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": "noon"},
				{"type": "text", "text": "and tomorrow?"}]},
			{"role": "system", "content": "mid-conversation note"}]}`)
	assert.Equal(t, "k3", q.Model)
	assert.True(t, q.Stream)
	assert.Equal(t, ptr(64), q.MaxTokens)
	assert.Equal(t, ptr(0.5), q.Temperature)
	assert.Equal(t, ptr(4), q.TopK)
	assert.Nil(t, q.TopP)
	assert.Equal(t, "u1", q.PromptCacheKey)
	assert.Equal(t, &openai.Thinking{Type: "disabled"}, q.Thinking, "thinking is off unless asked for")
	reasoning := "look it up"
	want := []openai.Message{
		{Role: "system", Content: "be brief\nbe kind"},
		{Role: "user", Content: "weather?"},
		{Role: "assistant", Content: "Checking.", ReasoningContent: &reasoning, ToolCalls: []xtml.ToolCall{
			{ID: "toolu_1", Type: "function", Function: xtml.FunctionCall{Name: "weather", Arguments: `{"city": "Oslo"}`}},
			{ID: "toolu_2", Type: "function", Function: xtml.FunctionCall{Name: "time", Arguments: "{}"}}}},
		{Role: "tool", Content: "rain", ToolCallID: "toolu_1", Name: "weather"},
		{Role: "tool", Content: "noon", ToolCallID: "toolu_2", Name: "time"},
		{Role: "user", Content: "and tomorrow?"},
		{Role: "system", Content: "mid-conversation note"},
	}
	assert.Equal(t, want, q.Messages)
}

// TestToChatUserParts: several text blocks stay apart (each its own
// segment), a picture makes the message's parts, a message of tool
// results alone adds no empty user message.
func TestToChatUserParts(t *testing.T) {
	q := mustChat(t, `{"max_tokens": 1, "messages": [
		{"role": "user", "content": [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]},
		{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
			{"type": "text", "text": "what is it?"}]},
		{"role": "user", "content": [{"type": "text", "text": "single"}]},
		{"role": "user", "content": []}]}`)
	require.Len(t, q.Messages, 4)
	assert.Equal(t, openai.Content("one two"), q.Messages[0].Content)
	assert.Equal(t, []openai.ContentPart{{Text: "one "}, {Text: "two"}}, q.Messages[0].Parts)
	assert.Equal(t, openai.Content("what is it?"), q.Messages[1].Content)
	assert.Equal(t, []openai.ContentPart{
		{Image: true, ImageURL: "data:image/png;base64,AAAA", Param: "messages[1].content[0].source"},
		{Text: "what is it?"}}, q.Messages[1].Parts)
	assert.Nil(t, q.Messages[2].Parts, "one text block is plain content")
	assert.Equal(t, openai.TextMessage("user", ""), q.Messages[3], "an empty content is an empty user message")

	q = mustChat(t, `{"max_tokens": 1, "messages": [
		{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": null}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}`)
	require.Len(t, q.Messages, 2, "tool results alone: no user message after them")
	assert.Equal(t, "{}", q.Messages[0].ToolCalls[0].Function.Arguments, "a null input is {}")
	assert.Equal(t, "tool", q.Messages[1].Role)
}

// TestToChatThinking maps thinking and output_config.effort onto K3's
// thinking switch and effort.
func TestToChatThinking(t *testing.T) {
	for _, c := range []struct {
		thinking, effort string // JSON fields ("" for none)
		on               bool
		want             string
	}{
		{"", "", false, ""},
		{`{"type": "disabled"}`, `"high"`, false, ""},
		{`{"type": "enabled"}`, "", true, ""},
		{`{"type": "enabled", "budget_tokens": 1024}`, "", true, "low"},
		{`{"type": "enabled", "budget_tokens": 8192}`, "", true, "high"},
		{`{"type": "enabled", "budget_tokens": 32768}`, "", true, "max"},
		{`{"type": "enabled", "budget_tokens": 1024}`, `"medium"`, true, "medium"},
		{`{"type": "adaptive"}`, "", true, ""},
		{`{"type": "adaptive"}`, `"max"`, true, "max"},
	} {
		body := `{"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]`
		if c.thinking != "" {
			body += `, "thinking": ` + c.thinking
		}
		if c.effort != "" {
			body += `, "output_config": {"effort": ` + c.effort + `}`
		}
		q := mustChat(t, body+"}")
		assert.Equal(t, c.on, q.Thinking.Type == "enabled", body)
		assert.Equal(t, c.want, q.ReasoningEffort, body)
	}
}

// TestToChatToolsAndFormat: client tools become chat function tools,
// tool_choice chat's, output_config.format a strict response_format.
func TestToChatToolsAndFormat(t *testing.T) {
	q := mustChat(t, `{"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}],
		"tools": [{"name": "f", "description": "does f", "input_schema": {"type": "object"}, "strict": true},
			{"type": "custom", "name": "g", "input_schema": null}],
		"tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": true},
		"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}}`)
	require.Len(t, q.Tools, 2)
	assert.JSONEq(t, `{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}, "strict": true}}`, string(q.Tools[0]))
	assert.JSONEq(t, `{"type": "function", "function": {"name": "g"}}`, string(q.Tools[1]))
	assert.JSONEq(t, `{"type": "function", "function": {"name": "f"}}`, string(q.ToolChoice))
	assert.Equal(t, ptr(false), q.ParallelToolCalls)
	assert.JSONEq(t, `{"type": "json_schema", "json_schema": {"name": "output", "strict": true, "schema": {"type": "object"}}}`, string(q.ResponseFormat))

	for choice, want := range map[string]string{"auto": `"auto"`, "none": `"none"`, "any": `"required"`} {
		q := mustChat(t, `{"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], "tool_choice": {"type": "`+choice+`"}}`)
		assert.Equal(t, want, string(q.ToolChoice), choice)
		assert.Nil(t, q.ParallelToolCalls, choice)
	}
	q = mustChat(t, `{"max_tokens": 1, "messages": [{"role": "user", "content": "hi"}], "output_format": {"type": "json_schema", "schema": {"type": "string"}}}`)
	assert.JSONEq(t, `{"type": "json_schema", "json_schema": {"name": "output", "strict": true, "schema": {"type": "string"}}}`, string(q.ResponseFormat), "the beta's output_format")
}

// TestToChatRefusals: every refusal names its field and says why.
func TestToChatRefusals(t *testing.T) {
	const hi = `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct{ body, param, message string }{
		{`{` + hi + `}`, "max_tokens", "max_tokens is required"},
		{`{"max_tokens": 1, "messages": []}`, "messages", "messages must not be empty"},
		{`{"max_tokens": 1, ` + hi + `, "thinking": {"type": "enabled", "budget_tokens": -1}}`, "thinking", "thinking.budget_tokens must not be negative, got -1"},
		{`{"max_tokens": 1, ` + hi + `, "thinking": {"type": "on"}}`, "thinking", `thinking.type must be "enabled", "adaptive" or "disabled", got "on"`},
		{`{"max_tokens": 1, ` + hi + `, "thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}}`, "output_config", `output_config.effort "xhigh" is not one of low, medium, high, max`},
		{`{"max_tokens": 1, ` + hi + `, "system": [{"type": "image"}]}`, "system", `system part 0 is of type "image": only text parts are supported`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": 5}]}`, "messages", "messages[0].content must be a string or an array of content blocks"},
		{`{"max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]}`, "messages", `messages[0].role "tool" is not user, assistant or system`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "document"}]}]}`, "messages", `messages[0].content[0] is of type "document": a user message may have text, image and tool_result blocks`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image"}]}]}`, "messages", "messages[0].content[0]: an image block needs a source"},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file"}}]}]}`, "messages", `messages[0].content[0]: an image source of type "file": k3 takes base64 sources`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}]}`, "messages", `messages[0].content[0]: tool_result for "t9", which no tool_use before it has`},
		{`{"max_tokens": 1, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}]}`, "messages", "messages[0].content[0]: a tool_use needs id and name"},
		{`{"max_tokens": 1, "messages": [{"role": "assistant", "content": [{"type": "image"}]}]}`, "messages", `messages[0].content[0] is of type "image": an assistant message may have text, thinking and tool_use blocks`},
		{`{"max_tokens": 1, ` + hi + `, "tools": [{"type": "web_search_20250305", "name": "web_search"}]}`, "tools", `tools[0] is of type "web_search_20250305": only client tools (name, description, input_schema) are supported`},
		{`{"max_tokens": 1, ` + hi + `, "tools": [{"description": "x"}]}`, "tools", "tools[0]: a tool has no name"},
		{`{"max_tokens": 1, ` + hi + `, "output_config": {"format": {"type": "text"}}}`, "output_config", `output_config.format must be {"type": "json_schema", "schema": {...}}`},
		{`{"max_tokens": 1, ` + hi + `, "tool_choice": {"type": "some"}}`, "tool_choice", `tool_choice.type "some" is not one of auto, any, tool, none`},
	} {
		_, err := toChat(t, c.body)
		require.NotNil(t, err, c.body)
		assert.Equal(t, 400, err.Status, c.body)
		assert.Equal(t, c.param, err.Param, c.body)
		assert.Equal(t, c.message, err.Message, c.body)
	}
}
