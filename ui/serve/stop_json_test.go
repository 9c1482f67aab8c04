package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

const stopNotApplied = "the stop strings were not applied: the reply is held to JSON (response_format, or a required tool call), which a stop string would cut"

// Stop strings do not cut a reply held to JSON: every one of these would
// end the answer inside the JSON (or before a required call), so with
// response_format or tool_choice required they are left out, and the
// reply's warnings say so; streamed and not give the same JSON.
func TestStopDoesNotCutEnforcedJSON(t *testing.T) {
	s, _, _ := start(t, nil)
	stops := []string{"{", `"`, ":", "e"}
	rf := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "strict": true, "schema": json.RawMessage(fixture.PersonSchema)}}
	req := map[string]any{"model": "k3-demo", "max_tokens": 96, "stop": stops, "response_format": rf,
		"messages": []map[string]any{{"role": "user", "content": "who?"}}, "chat_template_kwargs": map[string]any{"thinking": false}}
	_, data := post(t, s, "/v1/chat/completions", req)
	r := decodeChat(t, data)
	require.NotNil(t, r.Choices[0].Message.Content, string(data))
	fixture.CheckPerson(t, *r.Choices[0].Message.Content, false)
	assert.Equal(t, "stop", r.Choices[0].FinishReason)
	assert.Equal(t, []any{stopNotApplied}, obj(t, data)["warnings"])

	req["stream"] = true
	_, evs := streamPost(t, s, req)
	var content string
	var warnings []string
	for _, c := range chatChunks(t, evs) {
		content += c.content()
		warnings = append(warnings, c.Warnings...)
	}
	assert.Equal(t, *r.Choices[0].Message.Content, content)
	assert.Equal(t, []string{stopNotApplied}, warnings)

	// a required call is made whatever the stop strings
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "person", "parameters": json.RawMessage(fixture.PersonSchema)}}}
	req = map[string]any{"model": "k3-demo", "max_tokens": 120, "stop": stops, "tools": tools, "tool_choice": "required",
		"messages": []map[string]any{{"role": "user", "content": "who?"}}, "chat_template_kwargs": map[string]any{"thinking": false}}
	_, data = post(t, s, "/v1/chat/completions", req)
	r = decodeChat(t, data)
	require.Len(t, r.Choices[0].Message.ToolCalls, 1, string(data))
	assert.Equal(t, "tool_calls", r.Choices[0].FinishReason)
	fixture.CheckPerson(t, r.Choices[0].Message.ToolCalls[0].Function.Arguments, false)
	assert.Contains(t, obj(t, data)["warnings"], stopNotApplied)

	// without a structure the same stop strings cut the answer
	req = map[string]any{"model": "k3-demo", "max_tokens": 96, "stop": []string{"{", `"`, ":", "e"},
		"messages": []map[string]any{{"role": "user", "content": "who?"}}, "chat_template_kwargs": map[string]any{"thinking": false}}
	_, data = post(t, s, "/v1/chat/completions", req)
	assert.Nil(t, obj(t, data)["warnings"], string(data))
}
