package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// agentsOut is what tools/openai-conformance/agents.mjs prints.
type agentsOut struct {
	Responses, ResponsesRoundTrip agentsResponse
	ResponsesStream               struct {
		Events                []string
		Text, Reasoning, Args string
		Final                 agentsResponse
	}
	ResponsesSummary struct {
		Plain, Final agentsResponse
		Events       []string
		Deltas       string
	}
	Chat struct {
		Content, Reasoning string
		PromptTokens       int
	}
	Messages, MessagesRoundTrip, MessagesNoThinking agentsMessage
	MessagesStream                                  struct {
		Events         []string
		Text, Thinking string
		Inputs         []map[string]any
		Final          agentsMessage
	}
	Errors map[string]struct {
		Thrown               bool
		Class, Type, Message string
		Status               int
	}
}

type agentsResponse struct {
	ID, Object, Status string
	Types              []string
	OutputText         *string
	Reasoning, Summary string
	Calls              []struct{ Name, Arguments, CallID string }
	Usage              *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	}
}

type agentsMessage struct {
	ID, Type, Role, StopReason string
	Types, Signatures          []string
	Thinking, Text             string
	ToolUses                   []struct {
		ID, Name string
		Input    map[string]any
	}
	Usage struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	}
}

// runAgents runs agents.mjs against url, or skips when node or the clients
// are not installed.
func runAgents(t *testing.T, url, key, model string) agentsOut {
	t.Helper()
	var got agentsOut
	fixture.NodeClients(t, "openai", "@anthropic-ai/sdk").Run(t, &got, "agents.mjs", "K3_BASE_URL="+url, "K3_API_KEY="+key, "K3_MODEL="+model)
	return got
}

// TestServeAgentAPIsConformance drives `k3 serve`'s /v1/responses and
// /v1/messages with the official openai and @anthropic-ai/sdk clients
// (tools/openai-conformance/agents.mjs), streamed and not, with a tool and
// a tool round trip, on the demo model, under a model alias, and checks
// that they read the reply chat completions gives.
func TestServeAgentAPIsConformance(t *testing.T) {
	dir := demoModel(t)
	const key = "conformance-key"
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--api-key", key, "--model-id", "k3-demo", "--model-alias", "claude-sonnet-4-5=k3-demo",
		"--chunk", "16", "--max-tokens", "8", "--keep-alive", "100ms")
	got := runAgents(t, url, key, "claude-sonnet-4-5")
	chat := got.Chat

	// Responses, not streamed: the chat reply as output items
	r := got.Responses
	assert.Equal(t, "response", r.Object)
	assert.Equal(t, "incomplete", r.Status, "the demo model fills the 8-token cap")
	assert.Equal(t, []string{"reasoning", "message"}, r.Types)
	assert.Equal(t, coerce(chat.Reasoning), r.Reasoning)
	require.NotNil(t, r.OutputText)
	assert.Equal(t, coerce(chat.Content), *r.OutputText)
	require.NotNil(t, r.Usage)
	assert.Equal(t, chat.PromptTokens, r.Usage.InputTokens)
	assert.Equal(t, 8, r.Usage.OutputTokens)
	assert.LessOrEqual(t, r.Usage.OutputTokensDetails.ReasoningTokens, 8)
	assert.Positive(t, r.Usage.OutputTokensDetails.ReasoningTokens)

	// streamed: the client's stream helper accepted every event and rebuilt
	// the same items
	rs := got.ResponsesStream
	require.GreaterOrEqual(t, len(rs.Events), 4)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}, rs.Events[:4])
	assert.Equal(t, "response.incomplete", rs.Events[len(rs.Events)-1])
	assert.Equal(t, r.Reasoning, rs.Reasoning)
	assert.Equal(t, *r.OutputText, rs.Text)
	assert.Equal(t, r.Types, rs.Final.Types)
	assert.Equal(t, r.Reasoning, rs.Final.Reasoning)
	assert.Empty(t, r.Summary, "no summary unless asked")

	// reasoning.summary: the thinking is the summary too, streamed as
	// reasoning_summary events the client's helper accepts
	sum := got.ResponsesSummary
	assert.Equal(t, r.Reasoning, sum.Plain.Reasoning)
	assert.Equal(t, r.Reasoning, sum.Plain.Summary)
	assert.Equal(t, r.Reasoning, sum.Deltas)
	// (the helper's rebuilt response keeps no summary deltas: it takes the
	// summary from response.completed only, and the demo's reply is cut)
	assert.Equal(t, r.Reasoning, sum.Final.Reasoning)
	assert.Contains(t, sum.Events, "response.reasoning_summary_part.added")
	assert.Contains(t, sum.Events, "response.reasoning_summary_part.done")

	// the round trip with function_call and function_call_output items
	rt := got.ResponsesRoundTrip
	assert.Equal(t, "incomplete", rt.Status)
	require.NotNil(t, rt.Usage)
	assert.Greater(t, rt.Usage.InputTokens, r.Usage.InputTokens)
	assert.Positive(t, rt.Usage.InputTokensDetails.CachedTokens, "the state of the previous request is reused")

	// Anthropic Messages: thinking and text blocks, the chat reply
	m := got.Messages
	assert.Equal(t, "message", m.Type)
	assert.Equal(t, "assistant", m.Role)
	assert.Equal(t, []string{"thinking", "text"}, m.Types)
	assert.Equal(t, []string{""}, m.Signatures)
	assert.Equal(t, coerce(chat.Reasoning), m.Thinking)
	assert.Equal(t, coerce(chat.Content), m.Text)
	assert.Equal(t, "max_tokens", m.StopReason)
	assert.Equal(t, chat.PromptTokens, m.Usage.InputTokens+m.Usage.CacheReadInputTokens)
	assert.Equal(t, 8, m.Usage.OutputTokens)

	ms := got.MessagesStream
	require.GreaterOrEqual(t, len(ms.Events), 4)
	assert.Equal(t, "message_start", ms.Events[0])
	assert.Equal(t, []string{"message_delta", "message_stop"}, ms.Events[len(ms.Events)-2:])
	assert.Equal(t, m.Thinking, ms.Thinking)
	assert.Equal(t, m.Text, ms.Text)
	assert.Equal(t, m.Types, ms.Final.Types)
	assert.Equal(t, "max_tokens", ms.Final.StopReason)
	assert.Equal(t, 8, ms.Final.Usage.OutputTokens)

	assert.Equal(t, "max_tokens", got.MessagesRoundTrip.StopReason)
	assert.Positive(t, got.MessagesRoundTrip.Usage.CacheReadInputTokens)
	assert.Equal(t, []string{"text"}, got.MessagesNoThinking.Types)

	for name, want := range map[string]struct {
		class, typ string
		status     int
	}{
		"responsesPrevious": {"BadRequestError", "invalid_request_error", 400},
		"responsesModel":    {"NotFoundError", "invalid_request_error", 404},
		"messagesModel":     {"NotFoundError", "not_found_error", 404},
		"messagesKey":       {"AuthenticationError", "authentication_error", 401},
		"messagesBad":       {"BadRequestError", "invalid_request_error", 400},
	} {
		e := got.Errors[name]
		assert.True(t, e.Thrown, name)
		assert.Equal(t, want.class, e.Class, name)
		assert.Equal(t, want.typ, e.Type, name)
		assert.Equal(t, want.status, e.Status, name)
	}
	code, _, errs := stop()
	assert.Equal(t, ExitOK, code, errs)
	assert.Contains(t, errs, "POST /v1/responses stream 200")
	assert.Contains(t, errs, "POST /v1/messages json 200")
}

func TestServeModelAliasRefused(t *testing.T) {
	dir := demoModel(t)
	code, _, errs := runK3("serve", dir, "--model-id", "k3-demo", "--model-alias", "gpt-5-codex=other")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `--model-alias gpt-5-codex=other: this server serves only "k3-demo"`)
}
