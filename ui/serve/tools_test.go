package serve

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// scripted stands in for the model: it "generates" fixed K3 output (the
// random demo model never writes a tool call) and reads it with the chat
// session's own reader (chat.Replay), so the events and the reply are the
// ones a session sends for it.
type scripted struct {
	tok    *tokenizer.Tokenizer
	output string // XTML after the generation prompt, control strings as controls
	prompt []int  // the ids of the last request
}

func (g *scripted) Generate(ctx context.Context, ids []int, o chat.PromptOptions, on func(engine.Event)) (*chat.Reply, error) {
	g.prompt = ids
	gen := g.tok.EncodeSpecial(g.output)
	rep := &chat.Reply{IDs: gen, Stop: engine.StopLength}
	if n := len(gen); n > 0 && (gen[n-1] == g.tok.StopIDs()[0] || gen[n-1] == g.tok.StopIDs()[1]) {
		rep.Stop = engine.StopToken
	}
	r := chat.Replay(g.tok, gen, xtml.ReplyOptions{Thinking: o.Thinking, NoTools: o.NoTools, NoToolsWhy: o.NoToolsWhy}, on)
	for i, id := range gen {
		on(engine.Event{Kind: engine.EventToken, Step: i, Token: id})
	}
	rep.Reasoning, rep.Content, rep.ToolCalls, rep.Warnings, rep.ReasoningTokens = r.Reasoning, r.Content, r.ToolCalls, r.Warnings, r.ReasoningTokens
	return rep, nil
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"number"}},"required":["city"]}}}`

func scriptedServer(t *testing.T, output string) (*Server, *scripted) {
	t.Helper()
	var g *scripted
	s, _, _ := startWith(t, nil, func(tok *tokenizer.Tokenizer) generator {
		g = &scripted{tok: tok, output: output}
		return g
	})
	return s, g
}

const toolOutput = `The user wants the weather.<|close|>think<|sep|><|open|>response<|sep|>Let me check.<|close|>response<|sep|>` +
	`<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>` +
	`<|open|>argument key="city" type="string"<|sep|>Paris "<b>" & co<|close|>argument<|sep|>` +
	`<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|>` +
	`<|open|>call tool="get_weather" index="2"<|sep|>` +
	`<|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|><|close|>call<|sep|>` +
	`<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`

func toolRequest(stream bool) map[string]any {
	return map[string]any{"model": "k3-demo", "stream": stream, "max_tokens": 4096, "return_token_ids": true,
		"tools":    []json.RawMessage{json.RawMessage(weatherTool)},
		"messages": []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris and Oslo?"}}}
}

// assertChatRoundTrip posts back (an agent API's weather round trip: the
// question; the reasoning, text and both calls of the reply; the result
// "sun" of the first call and "snow" of the second, sent back in reverse
// order) to path and asserts the prompt it renders is the one chat
// completions renders for the same history, with the calls as chat
// answered them.
func assertChatRoundTrip(t *testing.T, s *Server, g *scripted, chat chatResp, path string, back map[string]any) {
	t.Helper()
	resp, data := post(t, s, path, back)
	require.Equal(t, 200, resp.StatusCode, string(data))
	got := g.prompt
	calls := chat.Choices[0].Message.ToolCalls
	chatReply(t, s, map[string]any{"max_tokens": 1, "tools": []json.RawMessage{json.RawMessage(weatherTool)},
		"messages": []map[string]any{
			{"role": "user", "content": "Weather in Paris and Oslo?"},
			{"role": "assistant", "content": "Let me check.", "tool_calls": calls, "reasoning_content": "The user wants the weather."},
			{"role": "tool", "tool_call_id": calls[1].ID, "content": "snow"},
			{"role": "tool", "tool_call_id": calls[0].ID, "content": "sun"}}})
	assert.Equal(t, string(s.o.Tok.Decode(g.prompt)), string(s.o.Tok.Decode(got)))
}

func TestToolCallsNonStreaming(t *testing.T) {
	s, g := scriptedServer(t, toolOutput)
	resp, data := post(t, s, "/v1/chat/completions", toolRequest(false))
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := decodeChat(t, data)
	c := r.Choices[0]
	assert.Equal(t, "tool_calls", c.FinishReason)
	assert.Equal(t, "The user wants the weather.", c.Message.ReasoningContent)
	require.NotNil(t, c.Message.Content)
	assert.Equal(t, "Let me check.", *c.Message.Content)
	require.Len(t, c.Message.ToolCalls, 2)
	assert.Empty(t, r.Warnings)
	for i, want := range []string{`{"city":"Paris \"<b>\" & co","days":3}`, `{"city":"Oslo"}`} {
		tc := c.Message.ToolCalls[i]
		assert.Equal(t, "function", tc.Type)
		assert.Equal(t, "get_weather", tc.Function.Name)
		assert.JSONEq(t, want, tc.Function.Arguments)
		assert.Regexp(t, `^call_[0-9a-f]{24}$`, tc.ID)
	}
	assert.NotEqual(t, c.Message.ToolCalls[0].ID, c.Message.ToolCalls[1].ID)
	// the prompt is the renderer's for the same messages and tools
	segs, err := xtml.Render([]xtml.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Weather in Paris and Oslo?"}},
		[]json.RawMessage{json.RawMessage(weatherTool)}, xtml.RenderOptions{})
	require.NoError(t, err)
	assert.Equal(t, xtml.Encode(s.o.Tok, segs), r.PromptTokenIDs)
	assert.Equal(t, r.PromptTokenIDs, g.prompt)

	// the calls come back as history and render as the model wrote them
	back := map[string]any{"model": "k3-demo", "max_tokens": 1, "tools": []json.RawMessage{json.RawMessage(weatherTool)}, "return_token_ids": true,
		"messages": []map[string]any{
			{"role": "user", "content": "Weather in Paris and Oslo?"},
			{"role": "assistant", "content": nil, "tool_calls": c.Message.ToolCalls, "reasoning_content": c.Message.ReasoningContent},
			{"role": "tool", "tool_call_id": c.Message.ToolCalls[1].ID, "content": "snow"},
			{"role": "tool", "tool_call_id": c.Message.ToolCalls[0].ID, "content": "sun"}}}
	resp, data = post(t, s, "/v1/chat/completions", back)
	require.Equal(t, 200, resp.StatusCode, string(data))
	text := string(s.o.Tok.Decode(g.prompt))
	assert.Contains(t, text, `<|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Paris "<b>" & co<|close|>argument<|sep|><|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|>`)
	assert.Contains(t, text, `<|open|>message role="tool" tool="get_weather" index="1"<|sep|>sun<|close|>message<|sep|>`, "results in the calls' order")
}

func TestToolCallsStreaming(t *testing.T) {
	s, _ := scriptedServer(t, toolOutput)
	_, evs := streamPost(t, s, toolRequest(true))
	var reasoning, content strings.Builder
	var calls []string
	var finish []string
	for _, c := range chatChunks(t, evs) {
		ch := c.Choices[0]
		if ch.Delta.ReasoningContent != nil {
			reasoning.WriteString(*ch.Delta.ReasoningContent)
		}
		if ch.Delta.Content != nil {
			content.WriteString(*ch.Delta.Content)
		}
		for k, tc := range ch.Delta.ToolCalls {
			assert.Equal(t, k, tc.Index)
			assert.Regexp(t, `^call_[0-9a-f]{24}$`, tc.ID)
			assert.Equal(t, "get_weather", tc.Function.Name)
			calls = append(calls, tc.Function.Arguments)
		}
		if ch.FinishReason != nil {
			finish = append(finish, *ch.FinishReason)
		}
	}
	assert.Equal(t, "The user wants the weather.", reasoning.String())
	assert.Equal(t, "Let me check.", content.String(), "no XTML of the calls in the content")
	require.Len(t, calls, 2)
	assert.JSONEq(t, `{"city":"Oslo"}`, calls[1])
	assert.Equal(t, []string{"tool_calls"}, finish)
}

// TestMalformedToolCall: a reply cut off by the token cap inside the
// second call keeps the first, complete call, leaves out the unfinished
// one and says so; no markup reaches the content, streamed or not.
func TestMalformedToolCall(t *testing.T) {
	cut := strings.Index(toolOutput, `<|open|>call tool="get_weather" index="2"`) + 20
	s, _ := scriptedServer(t, toolOutput[:cut])
	resp, data := post(t, s, "/v1/chat/completions", toolRequest(false))
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := decodeChat(t, data)
	c := r.Choices[0]
	assert.Equal(t, "tool_calls", c.FinishReason)
	require.Len(t, c.Message.ToolCalls, 1)
	assert.JSONEq(t, `{"city":"Paris \"<b>\" & co","days":3}`, c.Message.ToolCalls[0].Function.Arguments)
	require.NotNil(t, c.Message.Content)
	assert.Equal(t, "Let me check.", *c.Message.Content)
	assert.Equal(t, []string{"the output ends inside a tag (cut off?); the unfinished tag was left out",
		"the output ends inside the tools section; its complete calls were kept"}, r.Warnings)

	// streamed: the same content, the same call, the warnings on the last chunk
	_, evs := streamPost(t, s, toolRequest(true))
	var content strings.Builder
	var warnings []string
	calls := 0
	for _, c := range chatChunks(t, evs) {
		if d := c.Choices[0].Delta.Content; d != nil {
			content.WriteString(*d)
		}
		calls += len(c.Choices[0].Delta.ToolCalls)
		warnings = append(warnings, c.Warnings...)
	}
	assert.Equal(t, *r.Choices[0].Message.Content, content.String())
	assert.Equal(t, 1, calls)
	assert.Equal(t, r.Warnings, warnings)
}

func TestToolChoiceAndThinking(t *testing.T) {
	s, g := scriptedServer(t, "<|close|>think<|sep|><|open|>response<|sep|>ok<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")
	render := func(tools []json.RawMessage, ro xtml.RenderOptions) []int {
		segs, err := xtml.Render([]xtml.Message{{Role: "user", Content: "hi"}}, tools, ro)
		require.NoError(t, err)
		return xtml.Encode(s.o.Tok, segs)
	}
	other := json.RawMessage(`{"type":"function","function":{"name":"other"}}`)
	both := []json.RawMessage{json.RawMessage(weatherTool), other}
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for _, c := range []struct {
		req  map[string]any
		want []int
	}{
		{map[string]any{"reasoning_effort": "low"}, render(nil, xtml.RenderOptions{ThinkingEffort: "low"})},
		{map[string]any{"reasoning_effort": "medium"}, render(nil, xtml.RenderOptions{ThinkingEffort: "high"})},
		{map[string]any{"reasoning_effort": "none"}, render(nil, xtml.RenderOptions{NoThink: true})},
		{map[string]any{"thinking": map[string]any{"type": "disabled"}}, render(nil, xtml.RenderOptions{NoThink: true})},
		{map[string]any{"chat_template_kwargs": map[string]any{"thinking": false}}, render(nil, xtml.RenderOptions{NoThink: true})},
		{map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": true, "thinking_effort": "high"}}, render(nil, xtml.RenderOptions{ThinkingEffort: "high"})},
		{map[string]any{"tools": both, "tool_choice": "required"}, render(both, xtml.RenderOptions{ToolChoice: "required"})},
		{map[string]any{"tools": both, "tool_choice": "none"}, render(both, xtml.RenderOptions{ToolChoice: "none"})},
		{map[string]any{"tools": both, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "other"}}},
			render([]json.RawMessage{other}, xtml.RenderOptions{ToolChoice: "required"})},
		{map[string]any{"response_format": map[string]any{"type": "json_object"}}, render(nil, xtml.RenderOptions{ResponseFormat: json.RawMessage(`{"type":"json_object"}`)})},
		{map[string]any{"messages": []map[string]any{{"role": "developer", "content": "sys"}, {"role": "user", "content": "hi"}}}, nil},
	} {
		c.req["max_tokens"] = 50
		if c.req["messages"] == nil {
			c.req["messages"] = msgs
		}
		resp, data := post(t, s, "/v1/chat/completions", c.req)
		require.Equal(t, 200, resp.StatusCode, string(data))
		if c.want != nil {
			assert.Equal(t, c.want, g.prompt, "%v", c.req)
		} else {
			assert.Contains(t, string(s.o.Tok.Decode(g.prompt)), `<|open|>message role="system"<|sep|>sys<|close|>message<|sep|>`)
		}
		r := decodeChat(t, data)
		assert.Equal(t, "stop", r.Choices[0].FinishReason)
	}
}

func TestQueueFIFO(t *testing.T) {
	q := &queue{max: 2}
	a, err := q.join()
	require.NoError(t, err)
	b, err := q.join()
	require.NoError(t, err)
	c, err := q.join()
	require.NoError(t, err)
	_, err = q.join()
	assert.ErrorIs(t, err, errBusy)
	// the turns go in the order of joining, whenever each starts to wait:
	// each waiter sends its name, or its error, when its turn comes
	order := make(chan string, 3)
	ctx := context.Background()
	turn := func(p *place, name string) {
		if err := p.wait(ctx); err != nil {
			order <- err.Error()
			return
		}
		order <- name
		p.leave()
	}
	go turn(c, "c")
	go turn(b, "b")
	require.NoError(t, a.wait(ctx))
	a.leave()
	assert.Equal(t, "b", <-order)
	assert.Equal(t, "c", <-order)
	running, waiting := q.depth()
	assert.Eventually(t, func() bool { running, waiting = q.depth(); return !running && waiting == 0 }, time.Second, time.Millisecond)

	// a waiter whose context ends leaves the line
	a, _ = q.join()
	b, _ = q.join()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, b.wait(cctx), context.Canceled)
	b.leave()
	_, waiting = q.depth()
	assert.Equal(t, 0, waiting)
	a.leave()
	running, _ = q.depth()
	assert.False(t, running)
}

func TestStopFilter(t *testing.T) {
	var streamed strings.Builder
	f := newStopFilter([]string{"STOP", "éé"}, func(s string) { streamed.WriteString(s) })
	for _, piece := range []string{"ab", "cS", "TO"} {
		f.add(piece)
		assert.NotContains(t, streamed.String(), "S", "a possible stop string is held back")
	}
	f.add("x")
	assert.Equal(t, "abcSTOx", f.out.String()+f.pending)
	f.add("STOP and more")
	assert.True(t, f.hit)
	f.add("ignored")
	f.flush()
	assert.Equal(t, "abcSTOx", f.out.String())
	assert.Equal(t, "abcSTOx", streamed.String())

	g := newStopFilter([]string{"éé"}, nil)
	g.add("aébc") // holding 3 bytes back would split the é
	assert.Equal(t, "a", g.out.String(), "no rune is split")
	g.flush()
	assert.Equal(t, "aébc", g.out.String())
	assert.False(t, g.hit)
}
