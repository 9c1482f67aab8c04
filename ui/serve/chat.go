package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k3/engine/chat"
	"k3/tokenizer/xtml"

	"k3/ui/openai"
)

// chatPrompt renders a chat request in the XTML format.
func (s *Server) chatPrompt(q *openai.ChatRequest, j *job) *openai.Error {
	msgs, err := s.transcript(q, j)
	if err != nil {
		return err
	}
	thinking, effort, err := thinkingOf(q)
	if err != nil {
		return err
	}
	tools, choice, err := toolChoice(q.Tools, q.ToolChoice)
	if err != nil {
		return err
	}
	ro := xtml.RenderOptions{NoThink: !thinking, ThinkingEffort: effort, ToolChoice: choice}
	if rf := bytes.TrimSpace(q.ResponseFormat); len(rf) > 0 && !bytes.Equal(rf, []byte("null")) {
		ro.ResponseFormat = rf
		if j.goal.Answer, err = s.responseSchema(rf, j); err != nil {
			return err
		}
	}
	segs, rerr := xtml.Render(msgs, tools, ro)
	if rerr != nil {
		return openai.BadRequest("messages", "%v", rerr)
	}
	j.ids, j.thinking = xtml.Encode(s.o.Tok, segs), thinking
	if j.ids, rerr = chat.ExpandImages(s.o.Tok, j.ids, j.images); rerr != nil {
		return openai.BadRequest("messages", "%v", rerr)
	}
	return s.toolGoal(q, tools, choice, j)
}

// transcript is the request's messages as the renderer reads them, after
// the check that their text fits the context; each user message counts
// one sampling stream, and their pictures are read into j.
func (s *Server) transcript(q *openai.ChatRequest, j *job) ([]xtml.Message, *openai.Error) {
	if len(q.Messages) == 0 {
		return nil, openai.BadRequest("messages", "messages must not be empty")
	}
	text := 0 // bytes of text the transcript holds at least
	for _, m := range q.Messages {
		if m.Role != "assistant" {
			text += len(m.Content)
		}
	}
	if err := s.fitsText(text, "messages"); err != nil {
		return nil, err
	}
	msgs := make([]xtml.Message, len(q.Messages))
	for i, m := range q.Messages {
		msgs[i] = xtmlMessage(m)
		if msgs[i].Role == "user" {
			j.stream++
		}
		if m.Parts != nil { // each part its own segment, as Moonshot's encoder
			parts, err := s.partsOf(m.Parts, fmt.Sprintf("messages[%d]", i), &j.images)
			if err != nil {
				return nil, err
			}
			msgs[i].Parts = parts
		}
	}
	return msgs, nil
}

// xtmlMessage is a request message as the renderer reads it: developer is
// system, only tool and assistant messages keep call fields, reasoning is
// reasoning_content's other name.
func xtmlMessage(m openai.Message) xtml.Message {
	role := m.Role
	if role == "developer" { // OpenAI's newer name for system
		role = "system"
	}
	tm := xtml.Message{Role: role, Content: string(m.Content), Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
	if role != "tool" && role != "assistant" {
		tm.ToolCallID, tm.ToolCalls = "", nil
	}
	switch {
	case m.ReasoningContent != nil:
		tm.ReasoningContent = *m.ReasoningContent
	case m.Reasoning != nil:
		tm.ReasoningContent = *m.Reasoning
	}
	return tm
}

// toolGoal says what holds the reply's tool calls: nothing without tools
// or with tool_choice none, else the call the model opens (required: a
// call at once). A reply held to JSON drops the stop strings, with a note.
func (s *Server) toolGoal(q *openai.ChatRequest, tools []json.RawMessage, choice string, j *job) *openai.Error {
	switch {
	case len(tools) == 0:
		j.noTools = "no tools were declared"
	case choice == "none":
		j.noTools = `tool_choice is "none"`
	default: // required, or auto: a call the model opens is held from there on
		if err := s.callGoal(q, tools, choice == "required", j); err != nil {
			return err
		}
	}
	if !j.goal.Empty() && !j.goal.Auto && len(j.stops) > 0 {
		// the structure was asked for so that the reply parses: a stop
		// string would cut the JSON, or end the turn before a required call
		j.stops = nil
		j.notes = append(j.notes, "the stop strings were not applied: the reply is held to JSON (response_format, or a required tool call), which a stop string would cut")
	}
	return nil
}

// thinkingOf reads thinking on/off and the effort from the request:
// chat_template_kwargs (thinking, enable_thinking, thinking_effort),
// Moonshot's thinking {"type"} and OpenAI's reasoning_effort. "none" turns
// thinking off; OpenAI's efforts map onto K3's three: minimal and low to
// low, medium and high to high, xhigh and max to max.
func thinkingOf(q *openai.ChatRequest) (bool, string, *openai.Error) {
	thinking, effort := true, ""
	if q.Thinking != nil {
		switch q.Thinking.Type {
		case "enabled":
		case "disabled":
			thinking = false
		default:
			return false, "", openai.BadRequest("thinking", `thinking.type must be "enabled" or "disabled", got %q`, q.Thinking.Type)
		}
	}
	switch q.ReasoningEffort {
	case "":
	case "none":
		thinking = false
	case "minimal", "low":
		effort = "low"
	case "medium", "high":
		effort = "high"
	case "xhigh", "max":
		effort = "max"
	default:
		return false, "", openai.BadRequest("reasoning_effort", "reasoning_effort %q is not one of none, minimal, low, medium, high, xhigh, max", q.ReasoningEffort)
	}
	if k := q.ChatTemplateKwargs; k != nil {
		if k.EnableThinking != nil {
			thinking = *k.EnableThinking
		}
		if k.Thinking != nil {
			thinking = *k.Thinking
		}
		if k.ThinkingEffort != nil {
			effort = *k.ThinkingEffort
		}
	}
	if !thinking {
		effort = ""
	}
	return thinking, effort, nil
}

// toolChoice reads tool_choice: "auto", "none", "required", or a named
// function ({"type": "function", "function": {"name": ...}}), which keeps
// only that tool and requires a call.
func toolChoice(tools []json.RawMessage, raw json.RawMessage) ([]json.RawMessage, string, *openai.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return tools, "", nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "auto", "none", "required":
			return tools, str, nil
		}
		return nil, "", openai.BadRequest("tool_choice", "tool_choice %q is not one of auto, none, required", str)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return nil, "", openai.BadRequest("tool_choice", `tool_choice must be a string or {"type": "function", "function": {"name": ...}}`)
	}
	for _, t := range tools {
		var decl struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &decl) == nil && decl.Function.Name == named.Function.Name {
			return []json.RawMessage{t}, "required", nil
		}
	}
	return nil, "", openai.BadRequest("tool_choice", "tool_choice names %q, which is not among the tools", named.Function.Name)
}

func toolCallsOut(calls []xtml.ToolCall, indexed bool) []openai.ToolCall {
	out := make([]openai.ToolCall, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = newID("call_"), "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Function.Name, c.Function.Arguments
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var q openai.ChatRequest
	j := &job{}
	id, created := newID("chatcmpl-"), time.Now().Unix()
	s.handle(w, r, endpoint{name: "POST /v1/chat/completions", body: &q, j: j, checks: s.chatChecks(&q, j, nil), stream: &q.Stream,
		streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
			return s.streamChat(ctx, cancel, w, p, j, &q, id, created)
		},
		reply: func(res *result) any { return s.chatReply(j, res, &q, id, created) }})
}

// endpoint is what a generating endpoint gives handle: its name in the
// log, the value the request body is decoded into, the job its checks
// fill, the checks (run in order; the first failure is the answer),
// whether it streams (read after the checks), and how it answers: as a
// stream, or as a reply's JSON.
type endpoint struct {
	name     string
	body     any
	j        *job
	checks   []func() *openai.Error
	stream   *bool
	streamed func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error)
	reply    func(*result) any
}

// chatChecks read a request into j: read (nil: none; the endpoint's own
// reading of its body into q), the sampling fields, the chat prompt, and
// (the last) the context fit. Chat completions, Responses and Messages
// all read into a chat request.
func (s *Server) chatChecks(q *openai.ChatRequest, j *job, read func() *openai.Error) []func() *openai.Error {
	var checks []func() *openai.Error
	if read != nil {
		checks = append(checks, read)
	}
	return append(checks,
		func() *openai.Error { return s.samplingOf(&q.Sampling, j) },
		func() *openai.Error { return s.chatPrompt(q, j) },
		func() *openai.Error { return s.fit(j) })
}

// handle is the part every generating endpoint shares: it reads the body
// into ep.body, runs the checks, releases the body's share of the bodies
// in flight, takes a place in the queue, then either streams or generates
// and writes the reply (the positions reused for this client in
// X-K3-Reused-Positions), and logs the request. A stream whose client
// stops reading calls cancel, which ends the generation.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, ep endpoint) {
	t0 := time.Now()
	release, derr := s.decode(w, r, ep.body)
	if derr != nil {
		s.writeError(w, derr)
		return
	}
	defer release()
	j := ep.j
	j.client = clientOf(r)
	j.partition = s.keyPartition(r)
	for _, check := range ep.checks {
		if err := check(); err != nil {
			release()
			s.logf("%s %d: %s", ep.name, err.Status, err.Message)
			s.writeError(w, err)
			return
		}
	}
	release()
	stream := *ep.stream
	p, err := s.q.join()
	if err != nil {
		s.logf("%s 429: queue full", ep.name)
		s.writeError(w, asAPIError(err))
		return
	}
	defer p.leave()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var res *result
	if stream {
		res, err = ep.streamed(ctx, cancel, p)
	} else {
		res, err = s.answer(ctx, w, p, ep)
	}
	s.logRequest(ep.name, stream, j, res, err, t0)
}

// answer generates when p's turn comes and writes the reply's JSON.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, p *place, ep endpoint) (*result, error) {
	var res *result
	err := p.wait(ctx)
	if err == nil {
		res, err = s.generate(ctx, ep.j)
		p.leave() // before the reply goes out: the client's next request finds the place free
	}
	switch {
	case err == nil:
		body := ep.reply(res)
		w.Header().Set("X-K3-Reused-Positions", strconv.Itoa(res.shown))
		s.writeJSON(w, http.StatusOK, body)
	case ctx.Err() == nil:
		s.writeError(w, asAPIError(err))
	}
	return res, err
}

func (s *Server) logRequest(what string, stream bool, j *job, res *result, err error, t0 time.Time) {
	kind := "json"
	if stream {
		kind = "stream"
	}
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		s.logf("%s %s: cancelled (the client went away) after %.1fs", what, kind, time.Since(t0).Seconds())
	case err != nil:
		s.logf("%s %s: failed: %v", what, kind, err)
	default:
		s.logf("%s %s 200: prompt %d (reused %d), reply %d tokens, %s, %.1fs", what, kind, res.prompt, res.reused, len(res.ids), res.finish, time.Since(t0).Seconds())
		for _, w := range res.warnings {
			s.logf("  warning: %s", w)
		}
	}
}

func (s *Server) chatReply(j *job, res *result, q *openai.ChatRequest, id string, created int64) openai.ChatResponse {
	msg := openai.ResponseMessage{Role: "assistant", ToolCalls: toolCallsOut(res.calls, false)}
	if res.content != "" || len(res.calls) == 0 {
		msg.Content = &res.content
	}
	if res.reasoning != "" {
		msg.ReasoningContent = &res.reasoning
	}
	out := openai.ChatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.o.ModelID,
		Choices:  []openai.ChatChoice{{Message: msg, FinishReason: res.finish, Logprobs: s.chatLogprobs(res)}},
		Usage:    res.chatUsage(),
		Warnings: res.warnings}
	if q.ReturnTokenIDs {
		out.PromptTokenIDs, out.Choices[0].TokenIDs = j.ids, res.ids
	}
	return out
}

// streamChat answers with server-sent events: comments while the request
// waits and its prompt is read, the role, reasoning and content deltas as
// they are generated, tool calls when the reply is complete, the finish
// reason, the usage when asked for, then [DONE].
func (s *Server) streamChat(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job, q *openai.ChatRequest, id string, created int64) (*result, error) {
	e := openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer e.Quiet()
	if _, waiting := s.q.depth(); waiting > 0 {
		e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	withUsage := q.StreamOptions != nil && q.StreamOptions.IncludeUsage
	chunk := func(d openai.Delta, finish *string) openai.ChatChunk {
		return openai.NewChunk(id, created, s.o.ModelID, d, finish)
	}
	send := func(c openai.ChatChunk) { e.Data(c) }
	e.Data(chunk(openai.Delta{Role: "assistant", Content: new(string)}, nil))
	j.onPrefill = func(done, total int) { e.Comment(fmt.Sprintf("prefill %d/%d", done, total)) }
	j.onReasoning = func(t string) { send(chunk(openai.Delta{ReasoningContent: &t}, nil)) }
	j.onAnswer = func(t string) {
		c := chunk(openai.Delta{Content: &t}, nil)
		c.Choices[0].Logprobs = s.chunkLogprobs(j)
		send(c)
	}
	res, err := s.generateAt(ctx, p, j, sseFail(e))
	if err != nil {
		return nil, err
	}
	if len(res.calls) > 0 {
		send(chunk(openai.Delta{ToolCalls: toolCallsOut(res.calls, true)}, nil))
	}
	last := chunk(openai.Delta{}, &res.finish)
	last.Warnings, last.Choices[0].Logprobs = res.warnings, s.chunkLogprobs(j)
	send(last)
	if withUsage {
		e.Data(openai.UsageChunk(id, created, s.o.ModelID, res.chatUsage()))
	}
	e.Done()
	return res, nil
}

// clientOf is who sent r, for telling whether the kept engine state came
// from the same client's earlier request: its remote IP address (every
// client must also hold the key, when one is set).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// fitsText refuses, before it is tokenized, text of n bytes that cannot
// fit the context: no token is longer than the longest in the vocabulary.
func (s *Server) fitsText(n int, param string) *openai.Error {
	if c := s.o.MaxContext; c > 0 {
		if least := n / s.maxTokenBytes; least >= c {
			return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: "context_length_exceeded",
				Message: fmt.Sprintf("the prompt has at least %d positions; this server's context is %d", least, c)}
		}
	}
	return nil
}
