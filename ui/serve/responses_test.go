package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// obj decodes a JSON object.
func obj(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), string(data))
	return m
}

// namedEvent is one `event: NAME` / `data: JSON` server-sent event.
type namedEvent struct {
	name string
	data map[string]any
}

// postEvents posts body to path and reads the named events of the stream
// (comments are skipped; a data line without an event name fails).
func postEvents(t *testing.T, s *Server, path string, body any, hdr ...string) (*http.Response, []namedEvent) {
	t.Helper()
	js, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest("POST", "http://"+s.Addr()+path, bytes.NewReader(js))
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out []namedEvent
	name := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			require.NotEmpty(t, name, "data without an event name: %s", line)
			out = append(out, namedEvent{name, obj(t, []byte(line[len("data: "):]))})
			name = ""
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return resp, out
}

// chatReply is what /v1/chat/completions answers to the same conversation.
func chatReply(t *testing.T, s *Server, body map[string]any) chatResp {
	t.Helper()
	body["model"] = "k3-demo"
	resp, data := post(t, s, "/v1/chat/completions", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	return decodeChat(t, data)
}

func items(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, it := range m["output"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func partText(item map[string]any) string {
	parts := item["content"].([]any)
	if len(parts) == 0 {
		return ""
	}
	return parts[0].(map[string]any)["text"].(string)
}

// TestResponsesEqualsChat: /v1/responses gives the reply chat completions
// gives to the same conversation, as output items with usage, streamed
// and not; the stream's events come in the documented order with
// consecutive sequence numbers.
func TestResponsesEqualsChat(t *testing.T) {
	s, _, _ := start(t, nil)
	want := chatReply(t, s, map[string]any{"messages": []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}}})
	wc := want.Choices[0].Message

	body := map[string]any{"model": "k3-demo", "instructions": "Be brief.", "input": "Hello there"}
	resp, data := post(t, s, "/v1/responses", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := obj(t, data)
	assert.Equal(t, "response", r["object"])
	assert.Regexp(t, `^resp_[0-9a-f]{24}$`, r["id"])
	assert.Equal(t, "k3-demo", r["model"])
	assert.Equal(t, "incomplete", r["status"], "the demo model fills the 8-token cap")
	assert.Equal(t, map[string]any{"reason": "max_output_tokens"}, r["incomplete_details"])
	out := items(r)
	require.Len(t, out, 2)
	assert.Equal(t, "reasoning", out[0]["type"])
	assert.Equal(t, wc.ReasoningContent, partText(out[0]))
	assert.Equal(t, []any{}, out[0]["summary"])
	assert.Equal(t, "message", out[1]["type"])
	assert.Equal(t, "assistant", out[1]["role"])
	require.NotNil(t, wc.Content)
	assert.Equal(t, *wc.Content, partText(out[1]))
	u := r["usage"].(map[string]any)
	assert.EqualValues(t, want.Usage.PromptTokens, u["input_tokens"])
	assert.EqualValues(t, 8, u["output_tokens"])
	assert.EqualValues(t, want.Usage.PromptTokens+8, u["total_tokens"])
	assert.EqualValues(t, want.Usage.PromptTokens-1, u["input_tokens_details"].(map[string]any)["cached_tokens"], "the same prompt again: all but the last position reused")
	if *wc.Content == "" {
		assert.EqualValues(t, 8, u["output_tokens_details"].(map[string]any)["reasoning_tokens"], "the think channel never closed")
	}

	// streamed
	body["stream"] = true
	resp, evs := postEvents(t, s, "/v1/responses", body)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var names []string
	var reasoning, text strings.Builder
	for i, ev := range evs {
		assert.Equal(t, ev.name, ev.data["type"])
		assert.EqualValues(t, i, ev.data["sequence_number"])
		names = append(names, ev.name)
		switch ev.name {
		case "response.reasoning_text.delta":
			reasoning.WriteString(ev.data["delta"].(string))
		case "response.output_text.delta":
			text.WriteString(ev.data["delta"].(string))
		}
	}
	require.GreaterOrEqual(t, len(names), 2)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}, names[:4])
	assert.Equal(t, "response.incomplete", names[len(names)-1])
	assert.Equal(t, wc.ReasoningContent, reasoning.String())
	assert.Equal(t, *wc.Content, text.String())
	final := evs[len(evs)-1].data["response"].(map[string]any)
	fout := items(final)
	require.Len(t, fout, 2)
	assert.Equal(t, wc.ReasoningContent, partText(fout[0]))
	assert.Equal(t, *wc.Content, partText(fout[1]))
	assert.EqualValues(t, 8, final["usage"].(map[string]any)["output_tokens"])
	for _, n := range []string{"response.reasoning_text.done", "response.output_text.done", "response.content_part.done", "response.output_item.done"} {
		assert.Contains(t, names, n)
	}
}

const codexTool = `{"type":"function","name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"number"}},"required":["city"]},"strict":false}`

// TestResponsesTools: the model's calls come out as function_call items
// (streamed: their argument events), and the calls and their outputs sent
// back as input items render the prompt chat completions renders for the
// same history.
func TestResponsesTools(t *testing.T) {
	s, g := scriptedServer(t, toolOutput)
	body := map[string]any{"model": "k3-demo", "instructions": "Be brief.", "max_output_tokens": 4096,
		"tools": []json.RawMessage{json.RawMessage(codexTool)}, "input": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_text", "text": "Weather in Paris and Oslo?"}}}}}
	resp, data := post(t, s, "/v1/responses", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	first := g.prompt
	chat := chatReply(t, s, toolRequest(false))
	assert.Equal(t, g.prompt, first, "the same prompt as chat completions renders")
	r := obj(t, data)
	assert.Equal(t, "completed", r["status"])
	out := items(r)
	require.Len(t, out, 4)
	assert.Equal(t, "The user wants the weather.", partText(out[0]))
	assert.Equal(t, "Let me check.", partText(out[1]))
	for i, want := range []string{`{"city":"Paris \"<b>\" & co","days":3}`, `{"city":"Oslo"}`} {
		fc := out[2+i]
		assert.Equal(t, "function_call", fc["type"])
		assert.Equal(t, "get_weather", fc["name"])
		assert.Regexp(t, `^call_[0-9a-f]{24}$`, fc["call_id"])
		assert.Regexp(t, `^fc_[0-9a-f]{24}$`, fc["id"])
		assert.JSONEq(t, want, fc["arguments"].(string))
	}
	reasonTokens := len(s.o.Tok.Encode("The user wants the weather."))
	assert.EqualValues(t, reasonTokens, r["usage"].(map[string]any)["output_tokens_details"].(map[string]any)["reasoning_tokens"])

	// the round trip: calls and outputs as items, as chat messages
	back := map[string]any{"model": "k3-demo", "max_output_tokens": 1, "tools": []json.RawMessage{json.RawMessage(codexTool)},
		"input": []map[string]any{
			{"type": "message", "role": "user", "content": "Weather in Paris and Oslo?"},
			out[0], out[1], out[2], out[3],
			{"type": "function_call_output", "call_id": out[3]["call_id"], "output": "snow"},
			{"type": "function_call_output", "call_id": out[2]["call_id"], "output": []map[string]any{{"type": "input_text", "text": "sun"}}}}}
	assertChatRoundTrip(t, s, g, chat, "/v1/responses", back)

	// streamed: the items, then the calls' argument events
	body["stream"] = true
	_, evs := postEvents(t, s, "/v1/responses", body)
	var args []string
	var added []string
	for _, ev := range evs {
		switch ev.name {
		case "response.output_item.added":
			added = append(added, ev.data["item"].(map[string]any)["type"].(string))
		case "response.function_call_arguments.done":
			assert.Equal(t, "get_weather", ev.data["name"])
			args = append(args, ev.data["arguments"].(string))
		}
	}
	assert.Equal(t, []string{"reasoning", "message", "function_call", "function_call"}, added)
	require.Len(t, args, 2)
	assert.JSONEq(t, `{"city":"Oslo"}`, args[1])
	final := evs[len(evs)-1]
	assert.Equal(t, "response.completed", final.name)
	fout := items(final.data["response"].(map[string]any))
	require.Len(t, fout, 4)
	assert.Equal(t, "completed", fout[3]["status"])
	assert.JSONEq(t, `{"city":"Oslo"}`, fout[3]["arguments"].(string))
}

// TestResponsesNamespacedAndHostedTools: the functions of a namespace
// tool (Codex CLI sends them) are declared by their names and their calls
// name the namespace; tools the server would run itself are left out with
// a warning.
func TestResponsesNamespacedAndHostedTools(t *testing.T) {
	s, g := scriptedServer(t, toolOutput)
	body := map[string]any{"max_output_tokens": 4096, "instructions": "Be brief.", "input": "Weather in Paris and Oslo?", "tools": []json.RawMessage{
		json.RawMessage(`{"type": "namespace", "name": "weather", "description": "Weather tools", "tools": [` + codexTool + `]}`),
		json.RawMessage(`{"type": "web_search", "external_web_access": false}`)}}
	resp, data := post(t, s, "/v1/responses", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	got := g.prompt
	chatReply(t, s, toolRequest(false))
	assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(got)), "only get_weather is declared")
	r := obj(t, data)
	out := items(r)
	require.Len(t, out, 4)
	assert.Equal(t, "weather", out[2]["namespace"])
	assert.Equal(t, "get_weather", out[2]["name"])
	assert.Equal(t, []any{`tools[1] (type "web_search") was left out: this server offers function tools only`}, r["warnings"])

	body["stream"] = true
	_, evs := postEvents(t, s, "/v1/responses", body)
	final := evs[len(evs)-1].data["response"].(map[string]any)
	assert.Equal(t, "weather", items(final)[3]["namespace"])
	assert.Equal(t, r["warnings"], final["warnings"])
}

// TestResponsesThinkingAndChoice: reasoning.effort and tool_choice render
// the prompt chat's reasoning_effort and tool_choice render.
func TestResponsesThinkingAndChoice(t *testing.T) {
	s, g := scriptedServer(t, "<|close|>think<|sep|><|open|>response<|sep|>ok<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")
	for _, c := range []struct {
		effort string
		choice any
		chat   any
	}{
		{"none", "required", "required"},
		{"low", "auto", "auto"},
		{"high", map[string]string{"type": "function", "name": "get_weather"}, map[string]any{"type": "function", "function": map[string]string{"name": "get_weather"}}},
	} {
		resp, data := post(t, s, "/v1/responses", map[string]any{"input": "Hi", "reasoning": map[string]string{"effort": c.effort},
			"tool_choice": c.choice, "tools": []json.RawMessage{json.RawMessage(codexTool)}})
		require.Equal(t, 200, resp.StatusCode, string(data))
		got := g.prompt
		chatReply(t, s, map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "reasoning_effort": c.effort,
			"tool_choice": c.chat, "tools": []json.RawMessage{json.RawMessage(weatherTool)}})
		assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(got)), c.effort)
		r := obj(t, data)
		if c.effort == "none" {
			assert.Equal(t, "ok", partText(items(r)[0]), "thinking off: no reasoning item")
		}
	}
}

func TestResponsesErrors(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.APIKey = "k" })
	auth := []string{"Authorization", "Bearer k"}
	for _, c := range []struct {
		body   string
		status int
		param  string
		msg    string
	}{
		{`{"input": "Hi", "previous_response_id": "resp_1"}`, 400, "previous_response_id", "stores no responses"},
		{`{"input": "Hi", "model": "gpt-5-codex"}`, 404, "model", "does not exist"},
		{`{"input": "Hi", "tools": [{"type": "function"}]}`, 400, "tools", "tools[0]: a tool has no name"},
		{`{"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]}`, 400, "input", `call_id "c1"`},
		{`{"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}`, 400, "input[0].content[0].image_url", "data: URL"},
		{`{"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}`, 400, "input", "input_image needs image_url"},
		{`{"input": 3}`, 400, "input", "a string or an array"},
		{`{"input": "Hi", "max_output_tokens": 0}`, 400, "max_output_tokens", "at least 1"},
		{`{"input": "Hi", "reasoning": {"effort": "huge"}}`, 400, "reasoning_effort", "huge"},
	} {
		resp, data := post(t, s, "/v1/responses", c.body, auth...)
		require.Equal(t, c.status, resp.StatusCode, c.body+": "+string(data))
		e := obj(t, data)["error"].(map[string]any)
		assert.Equal(t, c.param, e["param"], c.body)
		assert.Contains(t, e["message"], c.msg, c.body)
	}
	resp, _ := post(t, s, "/v1/responses", `{"input": "Hi"}`)
	assert.Equal(t, 401, resp.StatusCode)
}

// TestModelAliases: an alias serves requests naming it and is listed; "*"
// serves any name; other names stay 404.
func TestModelAliases(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.ModelAliases = []string{"gpt-5-codex"} })
	resp, data := post(t, s, "/v1/responses", map[string]any{"model": "gpt-5-codex", "input": "Hi", "max_output_tokens": 1})
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.Equal(t, "k3-demo", obj(t, data)["model"])
	resp, _ = post(t, s, "/v1/chat/completions", map[string]any{"model": "claude-sonnet-4-5", "messages": []map[string]string{{"role": "user", "content": "Hi"}}})
	assert.Equal(t, 404, resp.StatusCode)
	_, data = get(t, s, "/v1/models")
	assert.Contains(t, string(data), `"id":"gpt-5-codex"`)

	anyName, _, _ := start(t, func(o *Options) { o.ModelAliases = []string{"*"} })
	resp, data = post(t, anyName, "/v1/messages", map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "Hi"}}})
	assert.Equal(t, 200, resp.StatusCode, string(data))
	_, data = get(t, anyName, "/v1/models")
	assert.NotContains(t, string(data), `"*"`)
}

func TestHeartbeat(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	h := heartbeat{every: 5 * time.Second}
	assert.True(t, h.due(t0), "the first one goes out at once")
	assert.False(t, h.due(t0.Add(4*time.Second)))
	assert.True(t, h.due(t0.Add(5*time.Second)))
	assert.False(t, h.due(t0.Add(9*time.Second)))
	assert.True(t, h.due(t0.Add(11*time.Second)))
	h = heartbeat{every: 5 * time.Second, last: t0}
	assert.False(t, h.due(t0.Add(time.Second)), "counted from last")
}
