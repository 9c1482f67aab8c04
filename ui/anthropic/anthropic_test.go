package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestWireBytes pins the bytes of a reply and of each stream event as the
// server wrote them when it built them as maps (the keys of blocks and
// events in alphabetical order; the message's in Anthropic's).
func TestWireBytes(t *testing.T) {
	m := NewMessage("msg_1", "k3", Usage{InputTokens: 5, OutputTokens: 2, CacheReadInputTokens: 3})
	m.StopReason, m.StopSequence = StopReason("stop", 0, "")
	m.Content = append(m.Content, Thinking("hm"), Text("hi"), ToolUse("toolu_1", "f", Input(`{"a":1}`)))
	assert.Equal(t, `{"id":"msg_1","type":"message","role":"assistant","model":"k3","content":[`+
		`{"signature":"","thinking":"hm","type":"thinking"},{"text":"hi","type":"text"},`+
		`{"id":"toolu_1","input":{"a":1},"name":"f","type":"tool_use"}],"stop_reason":"end_turn","stop_sequence":null,`+
		`"usage":{"input_tokens":5,"output_tokens":2,"cache_creation_input_tokens":0,"cache_read_input_tokens":3}}`, js(t, m))
	assert.Equal(t, `{"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}`,
		js(t, BlockStart{Type: "content_block_start", ContentBlock: Text("")}))
	assert.Equal(t, `{"delta":{"partial_json":"{}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
		js(t, BlockDelta{Type: "content_block_delta", Index: 2, Delta: InputJSONDelta{Type: "input_json_delta", PartialJSON: "{}"}}))
	md := MessageDelta{Type: "message_delta", Warnings: []string{"w"}}
	md.Delta.StopReason, md.Delta.StopSequence = StopReason("stop", 0, "END")
	assert.Equal(t, `{"delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"type":"message_delta",`+
		`"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},"warnings":["w"]}`, js(t, md))
	assert.Equal(t, `{"type":"ping"}`, js(t, Event{Type: "ping"}))
	assert.Equal(t, `{"error":{"message":"slow down","type":"rate_limit_error"},"type":"error"}`, js(t, NewError(429, "slow down")))
}

// TestTranslations: stop reasons by precedence, tool inputs that are not
// a JSON object become {}, and error types by status.
func TestTranslations(t *testing.T) {
	for _, c := range []struct {
		finish  string
		calls   int
		seq     string
		reason  string
		withSeq bool
	}{{"length", 2, "X", "max_tokens", false}, {"tool_calls", 1, "X", "tool_use", false}, {"stop", 0, "X", "stop_sequence", true}, {"stop", 0, "", "end_turn", false}} {
		r, s := StopReason(c.finish, c.calls, c.seq)
		assert.Equal(t, c.reason, *r)
		assert.Equal(t, c.withSeq, s != nil)
	}
	assert.JSONEq(t, `{"x":[1]}`, string(Input(`{"x":[1]}`)))
	for _, bad := range []string{"", "[1]", `"s"`, "{"} {
		assert.Equal(t, "{}", string(Input(bad)), bad)
	}
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 503: "api_error", 529: "overloaded_error"} {
		assert.Equal(t, typ, ErrorType(status), "%d", status)
	}
}
