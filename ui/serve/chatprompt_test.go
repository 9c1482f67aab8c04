package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// TestXTMLMessage: a request message as the renderer reads it: developer
// is system, only tool and assistant messages keep their call fields,
// reasoning stands in for reasoning_content.
func TestXTMLMessage(t *testing.T) {
	r, rc := "from reasoning", "from reasoning_content"
	calls := []xtml.ToolCall{openai.HistoryCall("c1", "f", "{}")}
	assert.Equal(t, xtml.Message{Role: "system", Content: "be brief"}, xtmlMessage(openai.Message{Role: "developer", Content: "be brief"}))
	assert.Equal(t, xtml.Message{Role: "user", Content: "hi", Name: "ann"},
		xtmlMessage(openai.Message{Role: "user", Content: "hi", Name: "ann", ToolCallID: "c1", ToolCalls: calls}), "a user message has no call fields")
	assert.Equal(t, xtml.Message{Role: "assistant", ToolCalls: calls, ReasoningContent: rc},
		xtmlMessage(openai.Message{Role: "assistant", ToolCalls: calls, ReasoningContent: &rc, Reasoning: &r}), "reasoning_content first")
	assert.Equal(t, xtml.Message{Role: "assistant", ReasoningContent: r}, xtmlMessage(openai.Message{Role: "assistant", Reasoning: &r}))
	assert.Equal(t, xtml.Message{Role: "tool", Content: "rain", Name: "weather", ToolCallID: "c1"},
		xtmlMessage(openai.Message{Role: "tool", Content: "rain", Name: "weather", ToolCallID: "c1"}))
}
