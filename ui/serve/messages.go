package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k3/ui/anthropic"
	"k3/ui/openai"
)

// POST /v1/messages: Anthropic's Messages API (what Claude Code speaks).
// system, the messages' text, tool_use, tool_result and thinking blocks,
// tools and tool_choice become a chat request; thinking {"type":
// "enabled"} turns K3's thinking on (it is off without it, as in
// Anthropic's API; "adaptive" turns it on too) and budget_tokens or
// output_config.effort picks the effort. The reply is
// content blocks (thinking, text, tool_use), streamed as the Messages
// events or not; errors have Anthropic's shape. The key may come as
// x-api-key; anthropic-version and anthropic-beta are accepted and not
// read.

type messagesRequest struct {
	Model         string            `json:"model"`
	System        json.RawMessage   `json:"system"`
	Messages      []anthropicMsg    `json:"messages"`
	MaxTokens     *int              `json:"max_tokens"`
	StopSequences []string          `json:"stop_sequences"`
	Stream        bool              `json:"stream"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	OutputConfig *struct {
		Effort string          `json:"effort"`
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"` // the structured-outputs beta's name
	// Metadata.UserID partitions the prompt cache, as prompt_cache_key
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	// Anthropic's Messages API has no log-probabilities: refused
	// (noLogprobs), as its own server refuses a field it does not have
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
}

// noLogprobs refuses logprobs and top_logprobs on /v1/messages: the
// Messages API has none (Anthropic answers a field it does not have with
// invalid_request_error), and a client that asks for them must not take
// a reply without them as having none to give.
func noLogprobs(m *messagesRequest) *openai.Error {
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"logprobs", m.Logprobs}, {"top_logprobs", m.TopLogprobs}} {
		if v := bytes.TrimSpace(f.v); len(v) > 0 && !bytes.Equal(v, []byte("null")) && !bytes.Equal(v, []byte("false")) {
			return openai.BadRequest(f.name, "%s: the Messages API has no log-probabilities; /v1/chat/completions, /v1/completions and /v1/responses give them", f.name)
		}
	}
	return nil
}

type anthropicMsg struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is one content block (the fields of every type k3 reads).
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Source    *struct {
		Type      string `json:"type"` // base64 or url
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// imagePart is an image block as a chat content part: a base64 source as
// a data: URL, a url source as it is (refused: k3 fetches nothing).
func imagePart(b anthropicBlock, param string) (openai.ContentPart, error) {
	switch {
	case b.Source == nil:
		return openai.ContentPart{}, fmt.Errorf("an image block needs a source")
	case b.Source.Type == "base64":
		return openai.ContentPart{Image: true, ImageURL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data, Param: param}, nil
	case b.Source.Type == "url":
		return openai.ContentPart{Image: true, ImageURL: b.Source.URL, Param: param}, nil
	}
	return openai.ContentPart{}, fmt.Errorf("an image source of type %q: k3 takes base64 sources", b.Source.Type)
}

// blocksOf reads a message's content: a string is one text block.
func blocksOf(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthropicBlock
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("must be a string or an array of content blocks")
	}
	return bs, nil
}

// thinkingEffort maps a thinking budget onto K3's efforts.
func thinkingEffort(budget int) string {
	switch {
	case budget <= 0:
		return ""
	case budget < 8192:
		return "low"
	case budget < 32768:
		return "high"
	}
	return "max"
}

// chatOfMessages reads a Messages request into the chat request.
func chatOfMessages(m *messagesRequest, q *openai.ChatRequest) *openai.Error {
	if m.MaxTokens == nil {
		return openai.BadRequest("max_tokens", "max_tokens is required")
	}
	if len(m.Messages) == 0 {
		return openai.BadRequest("messages", "messages must not be empty")
	}
	q.Model, q.Stream, q.MaxTokens = m.Model, m.Stream, m.MaxTokens
	if m.Metadata != nil {
		q.PromptCacheKey = m.Metadata.UserID
	}
	q.Temperature, q.TopP, q.TopK = m.Temperature, m.TopP, m.TopK
	q.Thinking = &openai.Thinking{Type: "disabled"}
	if t := m.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			if t.BudgetTokens < 0 {
				return openai.BadRequest("thinking", "thinking.budget_tokens must not be negative, got %d", t.BudgetTokens)
			}
			q.Thinking.Type, q.ReasoningEffort = "enabled", thinkingEffort(t.BudgetTokens)
		case "adaptive":
			q.Thinking.Type = "enabled"
		case "disabled":
		default:
			return openai.BadRequest("thinking", `thinking.type must be "enabled", "adaptive" or "disabled", got %q`, t.Type)
		}
	}
	if oc := m.OutputConfig; oc != nil && oc.Effort != "" && q.Thinking.Type == "enabled" {
		switch oc.Effort {
		case "low", "medium", "high", "max":
			q.ReasoningEffort = oc.Effort // as reasoning_effort: medium is high
		default:
			return openai.BadRequest("output_config", "output_config.effort %q is not one of low, medium, high, max", oc.Effort)
		}
	}
	if sys, err := joinText(m.System, "\n", "text"); err != nil { // blocks one a line
		return openai.BadRequest("system", "system %v", err)
	} else if sys != "" {
		q.Messages = append(q.Messages, msg("system", sys))
	}
	names := map[string]string{} // tool_use id -> tool name
	for i, am := range m.Messages {
		bs, err := blocksOf(am.Content)
		if err != nil {
			return openai.BadRequest("messages", "messages[%d].content %v", i, err)
		}
		switch am.Role {
		case "system": // mid-conversation system text (Claude Code sends it)
			t, err := textOf(am.Content, "text")
			if err != nil {
				return openai.BadRequest("messages", "messages[%d].content %v", i, err)
			}
			q.Messages = append(q.Messages, msg("system", t))
		case "user":
			var text strings.Builder
			var parts []openai.ContentPart // each text block its own segment
			for k, b := range bs {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
					parts = append(parts, openai.ContentPart{Text: b.Text})
				case "image":
					p, err := imagePart(b, fmt.Sprintf("messages[%d].content[%d].source", i, k))
					if err != nil {
						return openai.BadRequest("messages", "messages[%d].content[%d]: %v", i, k, err)
					}
					parts = append(parts, p)
				case "tool_result":
					name, ok := names[b.ToolUseID]
					if !ok {
						return openai.BadRequest("messages", "messages[%d].content[%d]: tool_result for %q, which no tool_use before it has", i, k, b.ToolUseID)
					}
					out, err := textOf(b.Content, "text")
					if err != nil {
						return openai.BadRequest("messages", "messages[%d].content[%d].content %v", i, k, err)
					}
					tm := msg("tool", out)
					tm.ToolCallID, tm.Name = b.ToolUseID, name
					q.Messages = append(q.Messages, tm)
				default:
					return openai.BadRequest("messages", "messages[%d].content[%d] is of type %q: a user message may have text, image and tool_result blocks", i, k, b.Type)
				}
			}
			if hasImage(parts) || (text.Len() > 0 || len(bs) == 0) {
				um := msg("user", text.String())
				if hasImage(parts) || len(parts) > 1 {
					um.Parts = parts
				}
				q.Messages = append(q.Messages, um)
			}
		case "assistant":
			a := openai.Message{Role: "assistant"}
			var text, reasoning strings.Builder
			for k, b := range bs {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "thinking":
					reasoning.WriteString(b.Thinking)
				case "redacted_thinking":
				case "tool_use":
					if b.ID == "" || b.Name == "" {
						return openai.BadRequest("messages", "messages[%d].content[%d]: a tool_use needs id and name", i, k)
					}
					args := strings.TrimSpace(string(b.Input))
					if args == "" || args == "null" {
						args = "{}"
					}
					names[b.ID] = b.Name
					a.ToolCalls = append(a.ToolCalls, toolCall(b.ID, b.Name, args))
				default:
					return openai.BadRequest("messages", "messages[%d].content[%d] is of type %q: an assistant message may have text, thinking and tool_use blocks", i, k, b.Type)
				}
			}
			a.Content = openai.Content(text.String())
			if reasoning.Len() > 0 {
				r := reasoning.String()
				a.ReasoningContent = &r
			}
			q.Messages = append(q.Messages, a)
		default:
			return openai.BadRequest("messages", "messages[%d].role %q is not user, assistant or system", i, am.Role)
		}
	}
	for i, t := range m.Tools {
		var d struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(t, &d); err != nil {
			return openai.BadRequest("tools", "tools[%d] is not a tool object: %v", i, err)
		}
		if d.Type != "" && d.Type != "custom" {
			return openai.BadRequest("tools", "tools[%d] is of type %q: only client tools (name, description, input_schema) are supported", i, d.Type)
		}
		ct, err := chatTool(d.Name, d.Description, d.InputSchema, d.Strict)
		if err != nil {
			return openai.BadRequest("tools", "tools[%d]: %v", i, err)
		}
		q.Tools = append(q.Tools, ct)
	}
	if err := outputFormat(m, q); err != nil {
		return err
	}
	if tc := m.ToolChoice; tc != nil {
		if tc.DisableParallelToolUse {
			no := false
			q.ParallelToolCalls = &no
		}
		switch tc.Type {
		case "auto", "none":
			q.ToolChoice, _ = json.Marshal(tc.Type)
		case "any":
			q.ToolChoice = json.RawMessage(`"required"`)
		case "tool":
			q.ToolChoice = namedChoice(tc.Name)
		default:
			return openai.BadRequest("tool_choice", "tool_choice.type %q is not one of auto, any, tool, none", tc.Type)
		}
	}
	return nil
}

// usageOf counts the reuse this client may see (result.shown).
func usageOf(res *result) anthropic.Usage {
	return anthropic.Usage{InputTokens: res.prompt - res.shown, OutputTokens: len(res.ids), CacheReadInputTokens: res.shown}
}

// stopReason is the reply's stop_reason and stop_sequence.
func stopReason(res *result) (*string, *string) {
	return anthropic.StopReason(res.finish, len(res.calls), res.stopSeq)
}

// readMessages reads a Messages request into the chat request q and its
// stop sequences into j.
func readMessages(m *messagesRequest, q *openai.ChatRequest, j *job) func() *openai.Error {
	return func() *openai.Error {
		if err := noLogprobs(m); err != nil {
			return err
		}
		if err := chatOfMessages(m, q); err != nil {
			return err
		}
		for _, st := range m.StopSequences {
			if st != "" {
				j.stops = append(j.stops, st)
			}
		}
		return nil
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var m messagesRequest
	var q openai.ChatRequest
	j := &job{}
	id := newID("msg_")
	s.handle(w, r, endpoint{name: "POST /v1/messages", body: &m, j: j, checks: s.chatChecks(&q, j, readMessages(&m, &q, j)), stream: &q.Stream,
		streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
			return s.streamMessage(ctx, cancel, w, p, j, id)
		},
		reply: func(res *result) any {
			out := anthropic.NewMessage(id, s.o.ModelID, usageOf(res))
			out.Warnings = res.warnings
			out.StopReason, out.StopSequence = stopReason(res)
			if res.reasoning != "" {
				out.Content = append(out.Content, anthropic.Thinking(res.reasoning))
			}
			if res.content != "" || len(res.calls) == 0 {
				out.Content = append(out.Content, anthropic.Text(res.content))
			}
			for _, c := range res.calls {
				out.Content = append(out.Content, anthropic.ToolUse(newID("toolu_"), c.Function.Name, anthropic.Input(c.Function.Arguments)))
			}
			return out
		}})
}

// countTokens answers POST /v1/messages/count_tokens: the positions the
// rendered prompt takes.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	var m messagesRequest
	release, err := s.decode(w, r, &m)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer release()
	if m.MaxTokens == nil {
		m.MaxTokens = new(int) // not part of this request
		*m.MaxTokens = 1
	}
	var q openai.ChatRequest
	j := &job{}
	checks := s.chatChecks(&q, j, readMessages(&m, &q, j))
	for _, check := range checks[:len(checks)-1] { // no fit: no reply
		if err := check(); err != nil {
			s.writeError(w, err)
			return
		}
	}
	release()
	s.writeJSON(w, http.StatusOK, anthropic.TokenCount{InputTokens: len(j.ids)})
}

// streamMessage answers with the Messages events: message_start (and a
// ping), then per content block content_block_start, its deltas as they
// are generated (thinking_delta, text_delta; input_json_delta when the
// reply is complete) and content_block_stop, then message_delta with the
// stop reason and usage, and message_stop.
func (s *Server) streamMessage(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job, id string) (*result, error) {
	e := openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer e.Quiet()
	ping := func() { e.Event("ping", anthropic.Event{Type: "ping"}) }
	e.Event("message_start", anthropic.MessageStart{Type: "message_start", Message: anthropic.NewMessage(id, s.o.ModelID, anthropic.Usage{InputTokens: len(j.ids)})})
	ping()
	if _, waiting := s.q.depth(); waiting > 0 {
		e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	index := -1
	start := func(block anthropic.Block) {
		index++
		e.Event("content_block_start", anthropic.BlockStart{Type: "content_block_start", Index: index, ContentBlock: block})
	}
	delta := func(d any) {
		e.Event("content_block_delta", anthropic.BlockDelta{Type: "content_block_delta", Index: index, Delta: d})
	}
	stop := func() { e.Event("content_block_stop", anthropic.BlockStop{Type: "content_block_stop", Index: index}) }
	b := &blocks{
		open: func(kind string) {
			if kind == "reasoning" {
				start(anthropic.Thinking(""))
			} else {
				start(anthropic.Text(""))
			}
		},
		delta: func(kind, d string) {
			if kind == "reasoning" {
				delta(anthropic.ThinkingDelta{Type: "thinking_delta", Thinking: d})
			} else {
				delta(anthropic.TextDelta{Type: "text_delta", Text: d})
			}
		},
		close: func(kind, text string) { stop() },
	}
	// a ping event when the prompt's reading starts and per keep-alive
	// interval after, for agents' idle watchdogs
	res, err := b.generate(ctx, s, e, p, j, heartbeat{every: s.o.KeepAlive}, ping, func(ae *openai.Error) {
		e.Event("error", anthropic.NewError(ae.Status, ae.Message))
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		start(anthropic.ToolUse(newID("toolu_"), c.Function.Name, json.RawMessage("{}")))
		delta(anthropic.InputJSONDelta{Type: "input_json_delta", PartialJSON: string(anthropic.Input(c.Function.Arguments))})
		stop()
	}
	md := anthropic.MessageDelta{Type: "message_delta", Usage: usageOf(res), Warnings: res.warnings}
	md.Delta.StopReason, md.Delta.StopSequence = stopReason(res)
	e.Event("message_delta", md)
	e.Event("message_stop", anthropic.Event{Type: "message_stop"})
	return res, nil
}

// anthropicErrors rewrites the error answers of h (OpenAI's shape, as
// writeError writes them) into Anthropic's: {"type": "error", "error":
// {"type", "message"}}, with the same status and headers.
func (s *Server) anthropicErrors(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		aw := &anthropicWriter{ResponseWriter: w}
		h(aw, r)
		if aw.status == 0 {
			return
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(aw.body.String())
		if json.Unmarshal(aw.body.Bytes(), &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		w.Header().Del("Content-Length")
		s.writeJSON(w, aw.status, anthropic.NewError(aw.status, msg))
	}
}

// anthropicWriter holds back an error answer (status 400 and up) for
// anthropicErrors; everything else passes through.
type anthropicWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *anthropicWriter) WriteHeader(code int) {
	if code >= 400 {
		a.status = code
		return
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *anthropicWriter) Write(b []byte) (int, error) {
	if a.status != 0 {
		return a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the stream.
func (a *anthropicWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// outputFormat reads output_config.format (or the beta's output_format),
// {"type": "json_schema", "schema": ...}, into a strict response_format:
// the answer is held to the schema, or the request is refused naming what
// cannot be held.
func outputFormat(m *messagesRequest, q *openai.ChatRequest) *openai.Error {
	raw, field := m.OutputFormat, "output_format"
	if oc := m.OutputConfig; oc != nil && len(bytes.TrimSpace(oc.Format)) > 0 && string(bytes.TrimSpace(oc.Format)) != "null" {
		raw, field = oc.Format, "output_config"
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.Type != "json_schema" || len(f.Schema) == 0 {
		return openai.BadRequest(field, `%s.format must be {"type": "json_schema", "schema": {...}}`, field)
	}
	rf, _ := json.Marshal(map[string]any{"type": "json_schema",
		"json_schema": map[string]any{"name": "output", "strict": true, "schema": f.Schema}})
	q.ResponseFormat = rf
	return nil
}

func hasImage(ps []openai.ContentPart) bool {
	for _, p := range ps {
		if p.Image {
			return true
		}
	}
	return false
}
