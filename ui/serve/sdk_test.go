package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/tokenizer"
)

// TestSDKsReadToolCalls runs the official clients
// (tools/openai-conformance/agents.mjs: openai's Responses API and
// @anthropic-ai/sdk's Messages API, streamed and not) against a reply with
// reasoning, text and two tool calls, which the random demo model never
// writes: the clients read the calls, rebuild them from the streamed
// events, and send them back. Skipped without node or the clients.
func TestSDKsReadToolCalls(t *testing.T) {
	clients := fixture.NodeClients(t, "openai", "@anthropic-ai/sdk")
	s, _, _ := startWith(t, func(o *Options) { o.APIKey = "k" }, func(tok *tokenizer.Tokenizer) generator {
		return &scripted{tok: tok, output: toolOutput}
	})

	var got struct {
		Responses, ResponsesRoundTrip struct {
			Status     string
			Types      []string
			OutputText string
			Reasoning  string
			Calls      []struct{ Name, Arguments, CallID string }
		}
		ResponsesStream struct {
			Events []string
			Args   string
			Final  struct {
				Types []string
				Calls []struct{ Name, Arguments, CallID string }
			}
		}
		Messages, MessagesRoundTrip struct {
			Types      []string
			Thinking   string
			Text       string
			StopReason string
			ToolUses   []struct {
				ID, Name string
				Input    map[string]any
			}
		}
		MessagesStream struct {
			Inputs []map[string]any
			Final  struct {
				Types    []string
				ToolUses []struct {
					Name  string
					Input map[string]any
				}
			}
		}
	}
	clients.Run(t, &got, "agents.mjs", "K3_BASE_URL="+s.BaseURL(), "K3_API_KEY=k", "K3_MODEL=k3-demo", "K3_MAX_TOKENS=4096")

	paris := `{"city":"Paris \"<b>\" & co","days":3}`
	r := got.Responses
	assert.Equal(t, "completed", r.Status)
	assert.Equal(t, []string{"reasoning", "message", "function_call", "function_call"}, r.Types)
	assert.Equal(t, "The user wants the weather.", r.Reasoning)
	assert.Equal(t, "Let me check.", r.OutputText)
	require.Len(t, r.Calls, 2)
	assert.Equal(t, "get_weather", r.Calls[0].Name)
	assert.JSONEq(t, paris, r.Calls[0].Arguments)
	assert.JSONEq(t, `{"city":"Oslo"}`, r.Calls[1].Arguments)
	assert.NotEqual(t, r.Calls[0].CallID, r.Calls[1].CallID)

	rs := got.ResponsesStream
	assert.Equal(t, "response.completed", rs.Events[len(rs.Events)-1])
	assert.Contains(t, rs.Events, "response.function_call_arguments.delta")
	assert.Equal(t, r.Types, rs.Final.Types)
	require.Len(t, rs.Final.Calls, 2)
	assert.JSONEq(t, paris, rs.Final.Calls[0].Arguments)
	assert.Equal(t, rs.Final.Calls[0].Arguments+rs.Final.Calls[1].Arguments, rs.Args)
	assert.Equal(t, "completed", got.ResponsesRoundTrip.Status)

	m := got.Messages
	assert.Equal(t, "tool_use", m.StopReason)
	assert.Equal(t, []string{"thinking", "text", "tool_use", "tool_use"}, m.Types)
	assert.Equal(t, "The user wants the weather.", m.Thinking)
	assert.Equal(t, "Let me check.", m.Text)
	require.Len(t, m.ToolUses, 2)
	assert.Equal(t, map[string]any{"city": `Paris "<b>" & co`, "days": 3.0}, m.ToolUses[0].Input)
	assert.Equal(t, map[string]any{"city": "Oslo"}, m.ToolUses[1].Input)

	ms := got.MessagesStream
	assert.Equal(t, m.Types, ms.Final.Types)
	require.Len(t, ms.Final.ToolUses, 2)
	assert.Equal(t, m.ToolUses[1].Input, ms.Final.ToolUses[1].Input, "the client parsed the streamed input_json_delta")
	require.Len(t, ms.Inputs, 2)
	assert.Equal(t, m.ToolUses[0].Input, ms.Inputs[0])
	assert.Equal(t, "tool_use", got.MessagesRoundTrip.StopReason)
}
