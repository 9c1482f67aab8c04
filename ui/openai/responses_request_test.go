package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/tokenizer/xtml"
)

func responsesToChat(t *testing.T, body string) (ChatRequest, ResponsesExtra, *Error) {
	t.Helper()
	var r ResponsesRequest
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	return ResponsesToChat(&r)
}

func mustResponsesChat(t *testing.T, body string) (ChatRequest, ResponsesExtra) {
	t.Helper()
	q, x, err := responsesToChat(t, body)
	require.Nil(t, err)
	return q, x
}

// TestResponsesToChatInput translates instructions and input items:
// consecutive reasoning, assistant text and function calls make one
// assistant message, a function call output a tool message named after
// its call.
func TestResponsesToChatInput(t *testing.T) {
	q, x := mustResponsesChat(t, `{"model": "k3", "instructions": "be brief", "max_output_tokens": 9, "stream": true,
		"temperature": 0.2, "prompt_cache_key": "c1", "parallel_tool_calls": false,
		"input": [
			{"role": "user", "content": "weather?"},
			{"type": "reasoning", "content": [{"type": "reasoning_text", "text": "look "}, {"type": "reasoning_text", "text": "it up"}]},
			{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
			{"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
			{"type": "function_call", "call_id": "c2", "name": "time"},
			{"type": "function_call_output", "call_id": "c1", "output": "rain"},
			{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "a "}, {"type": "input_text", "text": "b"}]}]}`)
	assert.Equal(t, "k3", q.Model)
	assert.True(t, q.Stream)
	assert.Equal(t, 9, *q.MaxTokens)
	assert.Equal(t, 0.2, *q.Temperature)
	assert.Equal(t, "c1", q.PromptCacheKey)
	assert.False(t, *q.ParallelToolCalls)
	assert.Empty(t, x.Warnings)
	reasoning := "look it up"
	want := []Message{
		{Role: "system", Content: "be brief"},
		{Role: "user", Content: "weather?"},
		{Role: "assistant", Content: "Checking.", ReasoningContent: &reasoning, Parts: []ContentPart{{Text: "Checking."}}, ToolCalls: []xtml.ToolCall{
			{ID: "c1", Type: "function", Function: xtml.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo"}`}},
			{ID: "c2", Type: "function", Function: xtml.FunctionCall{Name: "time", Arguments: "{}"}}}},
		{Role: "tool", Content: "rain", ToolCallID: "c1", Name: "weather"},
		{Role: "developer", Content: "a b", Parts: []ContentPart{{Text: "a "}, {Text: "b"}}},
	}
	assert.Equal(t, want, q.Messages)

	q, _ = mustResponsesChat(t, `{"input": "hello"}`)
	assert.Equal(t, []Message{{Role: "user", Content: "hello"}}, q.Messages, "a string input is one user message")

	q, _ = mustResponsesChat(t, `{"input": [
		{"type": "function_call", "call_id": "c1", "name": "f"},
		{"role": "assistant", "content": "after the call"},
		{"type": "reasoning", "content": null}]}`)
	require.Len(t, q.Messages, 3, "text after a call starts a new assistant message, and so does reasoning after text")
	assert.Equal(t, Content("after the call"), q.Messages[1].Content)
	assert.Equal(t, "", *q.Messages[2].ReasoningContent)
}

// TestResponsesToChatImages: an input_image makes the message's parts, in
// order, each naming where it is.
func TestResponsesToChatImages(t *testing.T) {
	q, _ := mustResponsesChat(t, `{"input": [{"role": "user", "content": [
		{"type": "input_text", "text": "what is "}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}, {"type": "input_text", "text": "this?"}]}]}`)
	require.Len(t, q.Messages, 1)
	assert.Equal(t, Content("what is this?"), q.Messages[0].Content)
	assert.Equal(t, []ContentPart{{Text: "what is "}, {Image: true, ImageURL: "data:image/png;base64,AAAA", Param: "input[0].content[1].image_url"}, {Text: "this?"}}, q.Messages[0].Parts)
}

// TestResponsesToChatToolsAndFormat: function tools and namespaces become
// chat tools (a namespace's functions remembered), others are left out
// with a warning; tool_choice and text.format become chat's.
func TestResponsesToChatToolsAndFormat(t *testing.T) {
	q, x := mustResponsesChat(t, `{"input": "hi",
		"tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": true},
			{"type": "web_search"},
			{"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read", "description": "reads"}]}],
		"tool_choice": {"type": "function", "name": "f"},
		"reasoning": {"effort": "low", "generate_summary": "auto"},
		"text": {"format": {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": true}}}`)
	require.Len(t, q.Tools, 2)
	assert.JSONEq(t, `{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}`, string(q.Tools[0]))
	assert.JSONEq(t, `{"type": "function", "function": {"name": "read", "description": "reads"}}`, string(q.Tools[1]))
	assert.Equal(t, map[string]string{"read": "fs"}, x.Namespaces)
	assert.Equal(t, []string{`tools[1] (type "web_search") was left out: this server offers function tools only`}, x.Warnings)
	assert.Equal(t, "fs", x.FunctionCall("fc_1", "call_1", "read", "{}", "completed").Namespace)
	assert.JSONEq(t, `{"type": "function", "function": {"name": "f"}}`, string(q.ToolChoice))
	assert.Equal(t, "low", q.ReasoningEffort)
	assert.JSONEq(t, `{"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": true}}`, string(q.ResponseFormat))

	q, _ = mustResponsesChat(t, `{"input": "hi", "tool_choice": "required", "text": {"format": {"type": "json_object"}}}`)
	assert.Equal(t, `"required"`, string(q.ToolChoice))
	assert.Equal(t, `{"type":"json_object"}`, string(q.ResponseFormat))
	q, _ = mustResponsesChat(t, `{"input": "hi", "text": {"format": {"type": "text"}}}`)
	assert.Nil(t, q.ResponseFormat)
}

// TestResponsesSummary reads reasoning.summary or its older name.
func TestResponsesSummary(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                                     "",
		`{"reasoning": {"effort": "high"}}`:      "",
		`{"reasoning": {"summary": "detailed"}}`: "detailed",
		`{"reasoning": {"generate_summary": "concise"}}`:                    "concise",
		`{"reasoning": {"summary": "auto", "generate_summary": "concise"}}`: "auto",
	} {
		var r ResponsesRequest
		require.NoError(t, json.Unmarshal([]byte(body), &r))
		assert.Equal(t, want, r.Summary(), body)
	}
}

// TestResponsesToChatLogprobs: top_logprobs or the include value asks
// the chat request for logprobs; neither leaves them off.
func TestResponsesToChatLogprobs(t *testing.T) {
	q, _, err := responsesToChat(t, `{"input": "hi", "top_logprobs": 2}`)
	require.Nil(t, err)
	assert.JSONEq(t, "true", string(q.Logprobs))
	require.NotNil(t, q.TopLogprobs)
	assert.Equal(t, 2, *q.TopLogprobs)
	q, _, err = responsesToChat(t, `{"input": "hi", "include": ["message.output_text.logprobs"]}`)
	require.Nil(t, err)
	assert.JSONEq(t, "true", string(q.Logprobs))
	assert.Nil(t, q.TopLogprobs)
	q, _, err = responsesToChat(t, `{"input": "hi"}`)
	require.Nil(t, err)
	assert.Empty(t, q.Logprobs)
}

// TestResponsesToChatRefusals: every refusal names its field and says why.
func TestResponsesToChatRefusals(t *testing.T) {
	for _, c := range []struct{ body, param, message string }{
		{`{"input": "hi", "previous_response_id": "resp_1"}`, "previous_response_id", "this server stores no responses: send the whole conversation in input instead of previous_response_id"},
		{`{"input": "hi", "conversation": "conv_1"}`, "conversation", "this server stores no conversations: send the whole conversation in input"},
		{`{"input": "hi", "background": true}`, "background", "background responses are not supported"},
		{`{"input": "hi", "max_output_tokens": 0}`, "max_output_tokens", "max_output_tokens must be at least 1, got 0"},
		{`{"input": "hi", "reasoning": {"summary": "long"}}`, "reasoning.summary", `reasoning.summary "long" is not one of auto, concise, detailed`},
		{`{"input": "hi", "text": {"format": {"type": "xml"}}}`, "text.format", `text.format.type "xml" is not one of text, json_object, json_schema`},
		{`{}`, "input", "input is required: a string or an array of items"},
		{`{"input": 5}`, "input", "input must be a string or an array of items"},
		{`{"input": [{"type": "item_reference", "id": "msg_1"}]}`, "input", "input[0] is an item_reference: this server stores no items, send the item itself"},
		{`{"input": [{"type": "web_search_call"}]}`, "input", `input[0] is of type "web_search_call": only message, reasoning, function_call and function_call_output items are supported`},
		{`{"input": [{"role": "tool", "content": "x"}]}`, "input", `input[0].role "tool" is not one of user, system, developer, assistant`},
		{`{"input": [{"role": "user", "content": [{"type": "input_file"}]}]}`, "input", `input[0].content part 0 is of type "input_file": only input_text/output_text/text parts are supported`},
		{`{"input": [{"role": "user", "content": [{"type": "input_image"}]}]}`, "input", "input[0].content [0]: an input_image needs image_url (a data: URL); this server stores no files"},
		{`{"input": [{"type": "reasoning", "content": "x"}]}`, "input", "input[0].content of a reasoning item must be an array of reasoning_text parts"},
		{`{"input": [{"type": "function_call", "name": "f"}]}`, "input", "input[0]: a function_call needs call_id and name"},
		{`{"input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]}`, "input", `input[0]: function_call_output for call_id "c9", which no function_call in input has`},
		{`{"input": "hi", "tools": [{"type": "function"}]}`, "tools", "tools[0]: a tool has no name"},
		{`{"input": "hi", "tool_choice": {"type": "function"}}`, "tool_choice", `tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}`},
	} {
		_, _, err := responsesToChat(t, c.body)
		require.NotNil(t, err, c.body)
		assert.Equal(t, 400, err.Status, c.body)
		assert.Equal(t, c.param, err.Param, c.body)
		assert.Equal(t, c.message, err.Message, c.body)
	}
	_, _, err := responsesToChat(t, `{"input": "hi", "tools": [5]}`)
	require.NotNil(t, err)
	assert.Equal(t, "tools", err.Param)
	assert.Regexp(t, `^tools\[0\] is not a tool object: json: cannot unmarshal number`, err.Message)
}
