package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponsesWireBytes pins the bytes of the Responses output items and
// events as the server wrote them when it built them as maps (keys in
// alphabetical order; the lists clients append to present when empty).
func TestResponsesWireBytes(t *testing.T) {
	js := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, `{"content":[{"text":"hm","type":"reasoning_text"}],"id":"rs_1","summary":[{"text":"hm","type":"summary_text"}],"type":"reasoning"}`,
		js(NewReasoningItem("rs_1", "hm", true)))
	assert.Equal(t, `{"content":[],"id":"rs_1","summary":[],"type":"reasoning"}`, js(NewReasoningItem("rs_1", "", true)))
	assert.Equal(t, `{"content":[],"id":"msg_1","role":"assistant","status":"in_progress","type":"message"}`, js(NewMessageItem("msg_1", "in_progress")))
	assert.Equal(t, `{"annotations":[],"logprobs":[],"text":"hi","type":"output_text"}`, js(NewOutputText("hi")))
	assert.Equal(t, `{"arguments":"{}","call_id":"call_1","id":"fc_1","name":"f","status":"completed","type":"function_call"}`,
		js(&FunctionCallItem{Type: "function_call", ID: "fc_1", CallID: "call_1", Name: "f", Arguments: "{}", Status: "completed"}))
	assert.Equal(t, `{"content_index":0,"delta":"a","item_id":"rs_1","output_index":0,"sequence_number":4,"type":"response.reasoning_text.delta"}`,
		js(TextDelta{Type: "response.reasoning_text.delta", SequenceNumber: 4, ItemID: "rs_1", Delta: "a"}))
	assert.Equal(t, `{"content_index":0,"delta":"a","item_id":"msg_1","logprobs":[],"output_index":1,"sequence_number":5,"type":"response.output_text.delta"}`,
		js(TextDelta{Type: "response.output_text.delta", SequenceNumber: 5, ItemID: "msg_1", OutputIndex: 1, Delta: "a", Logprobs: EmptyList}))
	u := NewResponseUsage(10, 4, 3, 2)
	assert.Equal(t, `{"input_tokens":10,"input_tokens_details":{"cached_tokens":3},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":14}`, js(u))
}
