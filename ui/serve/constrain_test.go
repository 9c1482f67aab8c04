package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// On the demo model (random weights: left alone it writes no JSON), an
// answer held to a json_schema parses and validates for greedy and for
// several seeds, streamed and not, with thinking on and off.
func TestResponseFormatEnforced(t *testing.T) {
	s, _, _ := start(t, nil)
	rf := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "strict": true, "schema": json.RawMessage(fixture.PersonSchema)}}
	n := 0
	for _, thinking := range []bool{false, true} {
		for _, temp := range []float64{0, 1} {
			for seed := range 2 {
				if temp == 0 && seed > 0 {
					continue
				}
				req := map[string]any{"model": "k3-demo", "max_tokens": 96, "seed": seed, "temperature": temp,
					"messages": []map[string]any{{"role": "user", "content": "who?"}}, "response_format": rf,
					"chat_template_kwargs": map[string]any{"thinking": thinking}}
				_, data := post(t, s, "/v1/chat/completions", req)
				r := decodeChat(t, data)
				require.NotNil(t, r.Choices[0].Message.Content, string(data))
				fixture.CheckPerson(t, *r.Choices[0].Message.Content, false)
				assert.Equal(t, "stop", r.Choices[0].FinishReason, "%v %v %s", thinking, temp, data)

				req["stream"] = true
				_, evs := streamPost(t, s, req)
				var content string
				for _, c := range chatChunks(t, evs) {
					content += c.content()
				}
				assert.Equal(t, *r.Choices[0].Message.Content, content, "streamed and not give the same answer")
				fixture.CheckPerson(t, content, false)
				n++
			}
		}
	}
	assert.Equal(t, 6, n)
}

// json_object holds the answer to a JSON object; a strict schema outside
// the subset is refused.
func TestResponseFormatObjectAndRefusal(t *testing.T) {
	s, _, _ := start(t, nil)
	req := map[string]any{"model": "k3-demo", "max_tokens": 40, "messages": []map[string]any{{"role": "user", "content": "hi"}},
		"response_format": map[string]any{"type": "json_object"}, "chat_template_kwargs": map[string]any{"thinking": false}}
	_, data := post(t, s, "/v1/chat/completions", req)
	r := decodeChat(t, data)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(*r.Choices[0].Message.Content), &v), string(data))

	req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "strict": true,
		"schema": map[string]any{"type": "array", "uniqueItems": true}}}
	resp, data := post(t, s, "/v1/chat/completions", req)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), `schema keyword \"uniqueItems\" is not supported`)
}

// tool_choice required (and named) gives one call of a declared tool whose
// arguments parse and fit its schema, for greedy and seeds, with thinking
// on and off.
func TestToolChoiceEnforced(t *testing.T) {
	s, _, _ := start(t, nil)
	tools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": json.RawMessage(
			`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)}},
		{"type": "function", "function": map[string]any{"name": "person", "parameters": json.RawMessage(fixture.PersonSchema)}},
	}
	n := 0
	for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "person"}}} {
		for _, thinking := range []bool{false, true} {
			for seed := range 2 {
				req := map[string]any{"model": "k3-demo", "max_tokens": 120, "seed": seed, "temperature": float64(seed),
					"messages": []map[string]any{{"role": "user", "content": "weather?"}}, "tools": tools, "tool_choice": choice,
					"chat_template_kwargs": map[string]any{"thinking": thinking}}
				_, data := post(t, s, "/v1/chat/completions", req)
				r := decodeChat(t, data)
				c := r.Choices[0]
				require.NotEmpty(t, c.Message.ToolCalls, string(data))
				assert.Equal(t, "tool_calls", c.FinishReason)
				for _, tc := range c.Message.ToolCalls { // every call of the reply is held
					call := tc.Function
					if choice != "required" {
						assert.Equal(t, "person", call.Name)
					}
					switch call.Name {
					case "person":
						fixture.CheckPerson(t, call.Arguments, false)
					case "get_weather":
						var v struct{ City, Unit string }
						require.NoError(t, json.Unmarshal([]byte(call.Arguments), &v), call.Arguments)
						assert.Contains(t, []string{"c", "f"}, v.Unit)
					default:
						t.Fatalf("call of %q", call.Name)
					}
				}
				n++
			}
		}
	}
	assert.Equal(t, 8, n)
}
