package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func blocksOfReply(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, b := range m["content"].([]any) {
		out = append(out, b.(map[string]any))
	}
	return out
}

// TestMessagesEqualsChat: /v1/messages gives the reply chat completions
// gives to the same conversation: thinking on with thinking enabled, off
// without it (Anthropic's default); streamed the same as not, in the
// documented event order; Anthropic's usage (input_tokens without the
// reused positions).
func TestMessagesEqualsChat(t *testing.T) {
	s, _, _ := start(t, nil)
	hdr := []string{"anthropic-version", "2023-06-01"}
	for _, thinking := range []bool{true, false} {
		chatBody := map[string]any{"messages": []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}}}
		body := map[string]any{"model": "k3-demo", "max_tokens": 8, "system": []map[string]any{{"type": "text", "text": "Be brief."}},
			"messages": []map[string]any{{"role": "user", "content": "Hello there"}}}
		if thinking {
			body["thinking"] = map[string]any{"type": "enabled", "budget_tokens": 40000}
			chatBody["reasoning_effort"] = "max"
		} else {
			chatBody["reasoning_effort"] = "none"
		}
		want := chatReply(t, s, chatBody)
		wc := want.Choices[0].Message

		resp, data := post(t, s, "/v1/messages", body, hdr...)
		require.Equal(t, 200, resp.StatusCode, string(data))
		m := obj(t, data)
		assert.Equal(t, "message", m["type"])
		assert.Equal(t, "assistant", m["role"])
		assert.Regexp(t, `^msg_[0-9a-f]{24}$`, m["id"])
		assert.Equal(t, "max_tokens", m["stop_reason"])
		assert.Nil(t, m["stop_sequence"])
		bs := blocksOfReply(m)
		if thinking {
			require.Len(t, bs, 2)
			assert.Equal(t, map[string]any{"type": "thinking", "thinking": wc.ReasoningContent, "signature": ""}, bs[0])
			bs = bs[1:]
		} else {
			assert.Empty(t, wc.ReasoningContent)
		}
		require.Len(t, bs, 1)
		assert.Equal(t, map[string]any{"type": "text", "text": *wc.Content}, bs[0])
		u := m["usage"].(map[string]any)
		assert.EqualValues(t, 1, u["input_tokens"], "the same prompt again: all but the last position reused")
		assert.EqualValues(t, want.Usage.PromptTokens-1, u["cache_read_input_tokens"])
		assert.EqualValues(t, 8, u["output_tokens"])

		body["stream"] = true
		_, evs := postEvents(t, s, "/v1/messages", body, hdr...)
		var names []string
		var think, text strings.Builder
		for _, ev := range evs {
			assert.Equal(t, ev.name, ev.data["type"])
			names = append(names, ev.name)
			if ev.name == "content_block_delta" {
				d := ev.data["delta"].(map[string]any)
				switch d["type"] {
				case "thinking_delta":
					think.WriteString(d["thinking"].(string))
				case "text_delta":
					text.WriteString(d["text"].(string))
				default:
					t.Errorf("delta %v", d)
				}
			}
		}
		require.GreaterOrEqual(t, len(names), 5)
		assert.Equal(t, []string{"message_start", "ping", "ping", "content_block_start"}, names[:4], "a ping when the prompt's reading starts")
		assert.Equal(t, []string{"content_block_stop", "message_delta", "message_stop"}, names[len(names)-3:])
		assert.Equal(t, wc.ReasoningContent, think.String())
		assert.Equal(t, *wc.Content, text.String())
		start := evs[0].data["message"].(map[string]any)
		assert.Equal(t, []any{}, start["content"])
		assert.EqualValues(t, want.Usage.PromptTokens, start["usage"].(map[string]any)["input_tokens"])
		md := evs[len(evs)-2].data
		assert.Equal(t, "max_tokens", md["delta"].(map[string]any)["stop_reason"])
		assert.EqualValues(t, 8, md["usage"].(map[string]any)["output_tokens"])
		assert.EqualValues(t, 1, md["usage"].(map[string]any)["input_tokens"])
	}
}

const anthropicTool = `{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"number"}},"required":["city"]}}`

// TestMessagesTools: calls come out as tool_use blocks (streamed: as
// input_json_delta), stop_reason tool_use; tool_use and tool_result blocks
// sent back render the prompt chat completions renders for the same
// history; tool_choice maps onto chat's.
func TestMessagesTools(t *testing.T) {
	s, g := scriptedServer(t, toolOutput)
	body := map[string]any{"model": "k3-demo", "max_tokens": 4096, "system": "Be brief.", "thinking": map[string]any{"type": "enabled", "budget_tokens": 50000},
		"tools": []json.RawMessage{json.RawMessage(anthropicTool)}, "messages": []map[string]any{{"role": "user", "content": "Weather in Paris and Oslo?"}}}
	resp, data := post(t, s, "/v1/messages", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	first := g.prompt
	chat := chatReply(t, s, toolRequest(false))
	assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(first)))
	m := obj(t, data)
	assert.Equal(t, "tool_use", m["stop_reason"])
	bs := blocksOfReply(m)
	require.Len(t, bs, 4)
	assert.Equal(t, "The user wants the weather.", bs[0]["thinking"])
	assert.Equal(t, "Let me check.", bs[1]["text"])
	for i, want := range []map[string]any{{"city": `Paris "<b>" & co`, "days": 3.0}, {"city": "Oslo"}} {
		b := bs[2+i]
		assert.Equal(t, "tool_use", b["type"])
		assert.Equal(t, "get_weather", b["name"])
		assert.Regexp(t, `^toolu_[0-9a-f]{24}$`, b["id"])
		assert.Equal(t, want, b["input"])
	}

	// the round trip
	back := map[string]any{"model": "k3-demo", "max_tokens": 1, "thinking": map[string]any{"type": "enabled"}, "tools": []json.RawMessage{json.RawMessage(anthropicTool)},
		"messages": []map[string]any{
			{"role": "user", "content": "Weather in Paris and Oslo?"},
			{"role": "assistant", "content": bs},
			{"role": "user", "content": []map[string]any{
				{"type": "tool_result", "tool_use_id": bs[3]["id"], "content": "snow"},
				{"type": "tool_result", "tool_use_id": bs[2]["id"], "content": []map[string]any{{"type": "text", "text": "sun"}}}}}}}
	assertChatRoundTrip(t, s, g, chat, "/v1/messages", back)

	// streamed
	body["stream"] = true
	_, evs := postEvents(t, s, "/v1/messages", body)
	var starts []string
	var inputs []string
	for _, ev := range evs {
		switch ev.name {
		case "content_block_start":
			starts = append(starts, ev.data["content_block"].(map[string]any)["type"].(string))
		case "content_block_delta":
			if d := ev.data["delta"].(map[string]any); d["type"] == "input_json_delta" {
				inputs = append(inputs, d["partial_json"].(string))
			}
		}
	}
	assert.Equal(t, []string{"thinking", "text", "tool_use", "tool_use"}, starts)
	require.Len(t, inputs, 2)
	assert.JSONEq(t, `{"city":"Oslo"}`, inputs[1])
	assert.Equal(t, "tool_use", evs[len(evs)-2].data["delta"].(map[string]any)["stop_reason"])

	// tool_choice: any is required, tool names one, none is none
	for _, c := range []struct{ anthropic, chat any }{
		{map[string]string{"type": "any"}, "required"},
		{map[string]string{"type": "none"}, "none"},
		{map[string]string{"type": "tool", "name": "get_weather"}, map[string]any{"type": "function", "function": map[string]string{"name": "get_weather"}}},
	} {
		resp, data := post(t, s, "/v1/messages", map[string]any{"max_tokens": 1, "tool_choice": c.anthropic, "tools": []json.RawMessage{json.RawMessage(anthropicTool)},
			"messages": []map[string]string{{"role": "user", "content": "Hi"}}})
		require.Equal(t, 200, resp.StatusCode, string(data))
		got := g.prompt
		chatReply(t, s, map[string]any{"max_tokens": 1, "tool_choice": c.chat, "reasoning_effort": "none", "tools": []json.RawMessage{json.RawMessage(weatherTool)},
			"messages": []map[string]string{{"role": "user", "content": "Hi"}}})
		assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(got)))
	}
}

// TestMessagesStopSequence: a stop sequence ends the reply before it, and
// the reply says which one.
func TestMessagesStopSequence(t *testing.T) {
	s, _ := scriptedServer(t, "<|open|>response<|sep|>one, two, three<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")
	body := map[string]any{"max_tokens": 100, "stop_sequences": []string{"three", ", t"}, "messages": []map[string]string{{"role": "user", "content": "Count"}}}
	resp, data := post(t, s, "/v1/messages", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	m := obj(t, data)
	assert.Equal(t, "stop_sequence", m["stop_reason"])
	assert.Equal(t, ", t", m["stop_sequence"])
	assert.Equal(t, "one", blocksOfReply(m)[0]["text"])

	body["stop_sequences"] = nil
	_, data = post(t, s, "/v1/messages", body)
	m = obj(t, data)
	assert.Equal(t, "end_turn", m["stop_reason"])
	assert.Equal(t, "one, two, three", blocksOfReply(m)[0]["text"])
}

// TestMessagesErrors: errors in Anthropic's shape, the key as x-api-key.
func TestMessagesErrors(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.APIKey = "k" })
	key := []string{"x-api-key", "k", "anthropic-version", "2023-06-01"}
	ok := `{"max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}`
	for _, c := range []struct {
		body   string
		hdr    []string
		status int
		typ    string
		msg    string
	}{
		{`{"messages": [{"role": "user", "content": "Hi"}]}`, key, 400, "invalid_request_error", "max_tokens is required"},
		{`{"max_tokens": 1, "messages": []}`, key, 400, "invalid_request_error", "must not be empty"},
		{`{"max_tokens": 1, "model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Hi"}]}`, key, 404, "not_found_error", "does not exist"},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}`, key, 400, "invalid_request_error", `k3 takes base64 sources`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]}`, key, 400, "invalid_request_error", `"document"`},
		{`{"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]}`, key, 400, "invalid_request_error", `"t1"`},
		{`{"max_tokens": 1, "tools": [{"type": "web_search_20250305", "name": "web_search"}], "messages": [{"role": "user", "content": "Hi"}]}`, key, 400, "invalid_request_error", "only client tools"},
		{`{"max_tokens": 1, "thinking": {"type": "maybe"}, "messages": [{"role": "user", "content": "Hi"}]}`, key, 400, "invalid_request_error", "thinking.type"},
		{`not json`, key, 400, "invalid_request_error", "not valid JSON"},
		{ok, []string{"x-api-key", "wrong"}, 401, "authentication_error", "not correct"},
		{ok, nil, 401, "authentication_error", "API key is required"},
	} {
		resp, data := post(t, s, "/v1/messages", c.body, c.hdr...)
		require.Equal(t, c.status, resp.StatusCode, c.body+": "+string(data))
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		e := obj(t, data)
		assert.Equal(t, "error", e["type"], c.body)
		assert.Equal(t, c.typ, e["error"].(map[string]any)["type"], c.body)
		assert.Contains(t, e["error"].(map[string]any)["message"], c.msg, c.body)
	}
	resp, data := post(t, s, "/v1/messages", ok, key...)
	require.Equal(t, 200, resp.StatusCode, string(data))
	u := obj(t, data)["usage"].(map[string]any)
	prompt := u["input_tokens"].(float64) + u["cache_read_input_tokens"].(float64)
	resp, data = get(t, s, "/v1/messages", key...)
	assert.Equal(t, 405, resp.StatusCode)
	assert.Equal(t, "invalid_request_error", obj(t, data)["error"].(map[string]any)["type"])

	// count_tokens: the rendered prompt's positions
	resp, data = post(t, s, "/v1/messages/count_tokens", `{"messages": [{"role": "user", "content": "Hi"}]}`, key...)
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.Equal(t, map[string]any{"input_tokens": prompt}, obj(t, data))
}

// TestMessagesClaudeCodeShape: what Claude Code sends - adaptive thinking
// with output_config.effort, a system message among the messages, text
// blocks with cache_control, beta headers - renders the prompt chat
// completions renders for the same conversation.
func TestMessagesClaudeCodeShape(t *testing.T) {
	s, g := scriptedServer(t, "<|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")
	body := `{"model": "claude-opus-4-8", "max_tokens": 64000, "stream": false, "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
		"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}, "metadata": {"user_id": "u"},
		"system": [{"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
		"messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]},
			{"role": "system", "content": "Agents: none."}]}`
	s.o.ModelAliases = []string{"*"}
	resp, data := post(t, s, "/v1/messages?beta=true", body, "anthropic-version", "2023-06-01", "anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14")
	require.Equal(t, 200, resp.StatusCode, string(data))
	got := g.prompt
	chatReply(t, s, map[string]any{"reasoning_effort": "medium", "messages": []map[string]string{
		{"role": "system", "content": "You are an agent.\nBe brief."}, {"role": "user", "content": "Say hello"}, {"role": "system", "content": "Agents: none."}}})
	assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(got)))
	m := obj(t, data)
	assert.Equal(t, "end_turn", m["stop_reason"])
	assert.Equal(t, []map[string]any{{"type": "text", "text": "Hello!"}}, blocksOfReply(m), "an empty think channel gives no thinking block")

	resp, data = post(t, s, "/v1/messages", `{"max_tokens": 1, "thinking": {"type": "adaptive"}, "output_config": {"effort": "extreme"}, "messages": [{"role": "user", "content": "Hi"}]}`)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(data), `output_config.effort \"extreme\"`)
}

// TestAgentEndpointsQueueAndCancel: the two endpoints share the chat
// queue (a request while one generates gets 429, in each API's error
// shape) and a client that goes away cancels its generation.
func TestAgentEndpointsQueueAndCancel(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.Queue = -1 })
	for i, c := range []struct {
		path  string
		body  map[string]any
		delta string
	}{
		{"/v1/messages", map[string]any{"max_tokens": 100000, "stream": true, "messages": []map[string]any{{"role": "user", "content": "go on"}}}, "event: content_block_delta"},
		{"/v1/responses", map[string]any{"max_output_tokens": 100000, "stream": true, "input": "go on", "reasoning": map[string]any{"effort": "none"}}, "event: response.output_text.delta"},
	} {
		js, _ := json.Marshal(c.body)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.Addr()+c.path, bytes.NewReader(js))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		rd := bufio.NewReader(resp.Body)
		for deltas := 0; deltas < 3; {
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			if strings.HasPrefix(line, c.delta) {
				deltas++
			}
		}
		r2, data := post(t, s, "/v1/messages", map[string]any{"max_tokens": 1, "messages": []map[string]any{{"role": "user", "content": "x"}}})
		assert.Equal(t, 429, r2.StatusCode)
		assert.Equal(t, "rate_limit_error", obj(t, data)["error"].(map[string]any)["type"])
		r2, data = post(t, s, "/v1/responses", map[string]any{"input": "x"})
		assert.Equal(t, 429, r2.StatusCode)
		assert.Contains(t, obj(t, data)["error"].(map[string]any)["message"], "busy")
		cancel()
		resp.Body.Close()
		require.Eventually(t, func() bool { return s.Stats().Cancelled == int64(i+1) }, 30*time.Second, 10*time.Millisecond)
	}
}
