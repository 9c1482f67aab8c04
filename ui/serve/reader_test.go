package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// served is a reply as a client assembles it.
type served struct {
	Reasoning, Content string
	Calls              []string // "name arguments"
	Finish             string
	Warnings           []string
}

func servedJSON(t *testing.T, s *Server, req map[string]any) served {
	t.Helper()
	req["stream"] = false
	resp, data := post(t, s, "/v1/chat/completions", req)
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := decodeChat(t, data)
	c := r.Choices[0]
	out := served{Reasoning: c.Message.ReasoningContent, Finish: c.FinishReason, Warnings: r.Warnings}
	if c.Message.Content != nil {
		out.Content = *c.Message.Content
	}
	for _, tc := range c.Message.ToolCalls {
		out.Calls = append(out.Calls, tc.Function.Name+" "+tc.Function.Arguments)
	}
	return out
}

func servedSSE(t *testing.T, s *Server, req map[string]any) served {
	t.Helper()
	req["stream"] = true
	_, evs := streamPost(t, s, req)
	var out served
	var reasoning, content strings.Builder
	for _, c := range chatChunks(t, evs) {
		out.Warnings = append(out.Warnings, c.Warnings...)
		for _, ch := range c.Choices {
			if d := ch.Delta.ReasoningContent; d != nil {
				reasoning.WriteString(*d)
			}
			if d := ch.Delta.Content; d != nil {
				content.WriteString(*d)
			}
			for _, tc := range ch.Delta.ToolCalls {
				out.Calls = append(out.Calls, tc.Function.Name+" "+tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				out.Finish = *ch.FinishReason
			}
		}
	}
	out.Reasoning, out.Content = reasoning.String(), content.String()
	return out
}

// TestReplyStreamedAsJSON: the server reads a reply once, with the
// session's reader, so a streamed reply is the non-streamed one: the same
// text, calls, finish reason and warnings, for well-formed output and for
// the output vLLM's and SGLang's tests read loosely (case ids of
// docs/replies.md).
func TestReplyStreamedAsJSON(t *testing.T) {
	call := `<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|><|close|>call<|sep|>`
	tools := `<|open|>tools<|sep|>` + call + `<|close|>tools<|sep|>`
	for _, c := range []struct {
		name, output string
		noThink      bool
		choice       any // tool_choice; "notools": no tools declared
		want         served
	}{
		{name: "well formed", output: toolOutput, want: served{Reasoning: "The user wants the weather.", Content: "Let me check.",
			Calls: []string{`get_weather {"city": "Paris \"<b>\" & co", "days": 3}`, `get_weather {"city": "Oslo"}`}, Finish: "tool_calls"}},
		// S27: think skipped; S30: think close without its <|sep|>
		{name: "S27", output: `<|open|>response<|sep|>plain reply<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>`,
			want: served{Content: "plain reply", Finish: "stop", Warnings: []string{"the response channel opened before the think channel was closed; it was read as if it were"}}},
		{name: "S30", output: `thought<|close|>think<|open|>response<|sep|>reply<|close|>response<|sep|>`,
			want: served{Reasoning: "thought", Content: "reply", Finish: "length", Warnings: []string{`a tag "think" was not ended by <|sep|>; it was read as if it were`}}},
		// S31: cut inside a tag; S4: a tools section cut after a complete call
		{name: "S31", output: `deep thought<|close|>`, want: served{Reasoning: "deep thought", Finish: "length",
			Warnings: []string{"the output ends inside a tag (cut off?); the unfinished tag was left out"}}},
		{name: "S4", output: `<|close|>response<|sep|><|open|>tools<|sep|>` + call, noThink: true, want: served{Calls: []string{`get_weather {"city": "Oslo"}`}, Finish: "tool_calls",
			Warnings: []string{"the output ends inside the tools section; its complete calls were kept"}}},
		// S38: a tools section inside think
		{name: "S38", output: `thought` + tools + `<|close|>think<|sep|><|close|>message<|sep|><|end_of_msg|>`, want: served{Reasoning: "thought",
			Calls: []string{`get_weather {"city": "Oslo"}`}, Finish: "tool_calls",
			Warnings: []string{"the tools section opened inside the think channel; it was read as if it were", "a stray <|close|>think<|sep|> was left out"}}},
		// V13: tool_choice none; S24: no tools declared
		{name: "V13", output: `answer<|close|>response<|sep|>` + tools, noThink: true, choice: "none", want: served{Content: "answer", Finish: "length",
			Warnings: []string{`the model wrote 1 tool call(s) but tool_choice is "none"; they were left out`}}},
		{name: "S24", output: `<|close|>response<|sep|>` + tools + `<|close|>message<|sep|><|end_of_msg|>`, noThink: true, choice: "notools", want: served{Finish: "stop",
			Warnings: []string{`the model wrote 1 tool call(s) but no tools were declared; they were left out`}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := scriptedServer(t, c.output)
			req := func() map[string]any {
				r := toolRequest(false)
				if c.noThink {
					r["reasoning_effort"] = "none"
				}
				switch c.choice {
				case nil:
				case "notools":
					delete(r, "tools")
				default:
					r["tool_choice"] = c.choice
				}
				return r
			}
			plain := servedJSON(t, s, req())
			if c.want.Content == "" && plain.Content == "" && len(plain.Calls) == 0 {
				c.want.Content = "" // a reply with no calls always has a content, maybe empty
			}
			assert.Equal(t, c.want, plain)
			assert.Equal(t, plain, servedSSE(t, s, req()))
		})
	}
}

// TestReasoningTokensInUsage: a chat reply's usage counts its think
// channel's text tokens in completion_tokens_details.reasoning_tokens,
// streamed and not; a completion has no such details.
func TestReasoningTokensInUsage(t *testing.T) {
	s, _ := scriptedServer(t, toolOutput)
	want := len(s.o.Tok.Encode("The user wants the weather."))
	require.Positive(t, want)
	type details struct {
		Usage *struct {
			CompletionTokens        int `json:"completion_tokens"`
			CompletionTokensDetails *struct {
				ReasoningTokens *int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
	}
	resp, data := post(t, s, "/v1/chat/completions", toolRequest(false))
	require.Equal(t, 200, resp.StatusCode, string(data))
	var plain details
	require.NoError(t, json.Unmarshal(data, &plain))
	require.NotNil(t, plain.Usage.CompletionTokensDetails, string(data))
	require.NotNil(t, plain.Usage.CompletionTokensDetails.ReasoningTokens)
	assert.Equal(t, want, *plain.Usage.CompletionTokensDetails.ReasoningTokens)
	assert.Less(t, want, plain.Usage.CompletionTokens)

	req := toolRequest(true)
	req["stream_options"] = map[string]any{"include_usage": true}
	_, evs := streamPost(t, s, req)
	var got *int
	for _, ev := range evs {
		var d details
		if ev.data == "" || ev.data == "[DONE]" || json.Unmarshal([]byte(ev.data), &d) != nil || d.Usage == nil {
			continue
		}
		require.NotNil(t, d.Usage.CompletionTokensDetails)
		got = d.Usage.CompletionTokensDetails.ReasoningTokens
	}
	require.NotNil(t, got, "a usage chunk with the details")
	assert.Equal(t, want, *got)

	resp, data = post(t, s, "/v1/completions", map[string]any{"model": "k3-demo", "prompt": "hi", "max_tokens": 2})
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.NotContains(t, string(data), "completion_tokens_details")
}
