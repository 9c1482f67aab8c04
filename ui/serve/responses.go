package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"k3/ui/openai"
)

// POST /v1/responses: OpenAI's Responses API, stateless. The request's
// input items (messages, function calls and their outputs, reasoning) and
// instructions become a chat request; the reply comes back as output items
// (reasoning, message, function calls), streamed as the Responses events or
// not. Nothing is stored, so previous_response_id is refused.

// responsesRequest is what k3 reads of a Responses request; other fields
// (store, include, metadata, parallel_tool_calls, truncation, user, ...)
// do not change the output and are ignored.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Stream             bool              `json:"stream"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       json.RawMessage   `json:"conversation"`
	Background         bool              `json:"background"`
	TopLogprobs        *int              `json:"top_logprobs"`
	Reasoning          *struct {
		Effort  string  `json:"effort"`
		Summary *string `json:"summary"`
		// GenerateSummary is summary's older name
		GenerateSummary *string `json:"generate_summary"`
	} `json:"reasoning"`
	Text *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

// summary is the reasoning summary asked for ("" when none): K3 writes no
// separate summary, so with auto, concise or detailed the thinking itself
// is the reasoning item's one summary_text part (what clients that show
// only summaries, such as Codex CLI, display).
func (r *responsesRequest) summary() string {
	switch {
	case r.Reasoning == nil:
		return ""
	case r.Reasoning.Summary != nil:
		return *r.Reasoning.Summary
	case r.Reasoning.GenerateSummary != nil:
		return *r.Reasoning.GenerateSummary
	}
	return ""
}

// responsesItem is one input item (the fields of every type k3 reads).
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// responsesExtra is what a Responses request says beyond the chat request:
// the namespace of each namespaced function, and what was left out.
type responsesExtra struct {
	namespaces map[string]string // function name -> namespace
	warnings   []string
}

// tool reads one tool declaration into q: a function, or a namespace of
// functions (each declared by its own name; its calls name the
// namespace). Tools the server would run itself (web_search, file_search,
// ...) and custom tools are left out with a warning: the model cannot
// call them here.
func (x *responsesExtra) tool(where string, t json.RawMessage, ns string, q *openai.ChatRequest) *openai.Error {
	var d struct {
		Type        string            `json:"type"`
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Parameters  json.RawMessage   `json:"parameters"`
		Tools       []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(t, &d); err != nil {
		return openai.BadRequest("tools", "%s is not a tool object: %v", where, err)
	}
	switch {
	case d.Type == "function":
		ct, err := chatTool(d.Name, d.Description, d.Parameters)
		if err != nil {
			return openai.BadRequest("tools", "%s: %v", where, err)
		}
		if ns != "" {
			if x.namespaces == nil {
				x.namespaces = map[string]string{}
			}
			x.namespaces[d.Name] = ns
		}
		q.Tools = append(q.Tools, ct)
	case d.Type == "namespace" && ns == "":
		for i, nt := range d.Tools {
			if err := x.tool(fmt.Sprintf("%s.tools[%d]", where, i), nt, d.Name, q); err != nil {
				return err
			}
		}
	default:
		x.warnings = append(x.warnings, fmt.Sprintf("%s (type %q) was left out: this server offers function tools only", where, d.Type))
	}
	return nil
}

// chatOfResponses reads a Responses request into the chat request.
func chatOfResponses(r *responsesRequest, q *openai.ChatRequest, x *responsesExtra) *openai.Error {
	switch {
	case r.PreviousResponseID != nil && *r.PreviousResponseID != "":
		return openai.BadRequest("previous_response_id", "this server stores no responses: send the whole conversation in input instead of previous_response_id")
	case len(bytes.TrimSpace(r.Conversation)) > 0 && !bytes.Equal(bytes.TrimSpace(r.Conversation), []byte("null")):
		return openai.BadRequest("conversation", "this server stores no conversations: send the whole conversation in input")
	case r.Background:
		return openai.BadRequest("background", "background responses are not supported")
	case r.TopLogprobs != nil && *r.TopLogprobs > 0:
		return openai.BadRequest("top_logprobs", "logprobs are not supported")
	}
	q.Model, q.Stream, q.MaxTokens, q.Temperature, q.TopP = r.Model, r.Stream, r.MaxOutputTokens, r.Temperature, r.TopP
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return openai.BadRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *r.MaxOutputTokens)
	}
	if r.Reasoning != nil {
		q.ReasoningEffort = r.Reasoning.Effort
		switch sum := r.summary(); sum {
		case "", "auto", "concise", "detailed":
		default:
			return openai.BadRequest("reasoning.summary", "reasoning.summary %q is not one of auto, concise, detailed", sum)
		}
	}
	if r.Text != nil {
		rf, err := responseFormatOf(r.Text.Format)
		if err != nil {
			return err
		}
		q.ResponseFormat = rf
	}
	if r.Instructions != nil && *r.Instructions != "" {
		q.Messages = append(q.Messages, msg("system", *r.Instructions))
	}
	if err := inputMessages(r.Input, q); err != nil {
		return err
	}
	for i, t := range r.Tools {
		if err := x.tool(fmt.Sprintf("tools[%d]", i), t, "", q); err != nil {
			return err
		}
	}
	if tc := bytes.TrimSpace(r.ToolChoice); len(tc) > 0 && tc[0] == '{' {
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if json.Unmarshal(tc, &named) != nil || named.Type != "function" || named.Name == "" {
			return openai.BadRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}`)
		}
		q.ToolChoice = namedChoice(named.Name)
	} else {
		q.ToolChoice = r.ToolChoice
	}
	return nil
}

// responseFormatOf reads text.format into chat's response_format.
func responseFormatOf(raw json.RawMessage) (json.RawMessage, *openai.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, openai.BadRequest("text.format", "text.format is not a format object: %v", err)
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		js := map[string]any{"name": f.Name, "schema": f.Schema}
		if f.Description != "" {
			js["description"] = f.Description
		}
		if f.Strict != nil {
			js["strict"] = *f.Strict
		}
		b, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		return b, nil
	}
	return nil, openai.BadRequest("text.format", "text.format.type %q is not one of text, json_object, json_schema", f.Type)
}

// inputMessages reads input (a string: one user message; or items) into
// chat messages. Consecutive reasoning, assistant text and function calls
// make one assistant message; a function call output is a tool message.
func inputMessages(raw json.RawMessage, q *openai.ChatRequest) *openai.Error {
	raw = bytes.TrimSpace(raw)
	var text string
	if json.Unmarshal(raw, &text) == nil {
		q.Messages = append(q.Messages, msg("user", text))
		return nil
	}
	var items []responsesItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return openai.BadRequest("input", "input must be a string or an array of items")
	}
	names := map[string]string{} // call_id -> function name
	// assistant returns the open assistant message (the last message, when
	// it is one that fresh may still join), or starts one.
	assistant := func(fresh func(*openai.Message) bool) *openai.Message {
		if n := len(q.Messages); n > 0 && q.Messages[n-1].Role == "assistant" && fresh(&q.Messages[n-1]) {
			return &q.Messages[n-1]
		}
		q.Messages = append(q.Messages, openai.Message{Role: "assistant"})
		return &q.Messages[len(q.Messages)-1]
	}
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			t, err := textOf(it.Content, "input_text", "output_text", "text")
			if err != nil {
				return openai.BadRequest("input", "input[%d].content %v", i, err)
			}
			switch it.Role {
			case "user", "system", "developer":
				m := msg(it.Role, t)
				m.Parts = partsOf(it.Content)
				q.Messages = append(q.Messages, m)
			case "assistant":
				m := assistant(func(m *openai.Message) bool { return m.Content == "" && len(m.ToolCalls) == 0 })
				m.Content, m.Parts = openai.Content(t), partsOf(it.Content)
			default:
				return openai.BadRequest("input", "input[%d].role %q is not one of user, system, developer, assistant", i, it.Role)
			}
		case "reasoning":
			var parts []struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(it.Content, &parts); len(bytes.TrimSpace(it.Content)) > 0 && err != nil && !bytes.Equal(bytes.TrimSpace(it.Content), []byte("null")) {
				return openai.BadRequest("input", "input[%d].content of a reasoning item must be an array of reasoning_text parts", i)
			}
			var r string
			for _, p := range parts {
				r += p.Text
			}
			m := assistant(func(m *openai.Message) bool { return m.Content == "" && len(m.ToolCalls) == 0 })
			r = deref(m.ReasoningContent) + r
			m.ReasoningContent = &r
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return openai.BadRequest("input", "input[%d]: a function_call needs call_id and name", i)
			}
			names[it.CallID] = it.Name
			m := assistant(func(*openai.Message) bool { return true })
			args := it.Arguments
			if args == "" {
				args = "{}"
			}
			m.ToolCalls = append(m.ToolCalls, toolCall(it.CallID, it.Name, args))
		case "function_call_output":
			name, ok := names[it.CallID]
			if !ok {
				return openai.BadRequest("input", "input[%d]: function_call_output for call_id %q, which no function_call in input has", i, it.CallID)
			}
			out, err := textOf(it.Output, "input_text", "output_text", "text")
			if err != nil {
				return openai.BadRequest("input", "input[%d].output %v", i, err)
			}
			m := msg("tool", out)
			m.ToolCallID, m.Name = it.CallID, name
			q.Messages = append(q.Messages, m)
		case "item_reference":
			return openai.BadRequest("input", "input[%d] is an item_reference: this server stores no items, send the item itself", i)
		default:
			return openai.BadRequest("input", "input[%d] is of type %q: only message, reasoning, function_call and function_call_output items are supported", i, typ)
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// outputItem is an output item (a map: each type has its own fields, and
// the empty lists the clients append to must be present).
type outputItem = map[string]any

// reasoningItem is a reasoning output item: the thinking as its
// reasoning_text content and, when summarised, as its summary_text summary
// too.
func reasoningItem(id, text string, summarised bool) outputItem {
	content, summary := []any{}, []any{}
	if text != "" {
		content = append(content, reasoningPart(text))
		if summarised {
			summary = append(summary, summaryPart(text))
		}
	}
	return outputItem{"type": "reasoning", "id": id, "summary": summary, "content": content}
}

func summaryPart(text string) map[string]any {
	return map[string]any{"type": "summary_text", "text": text}
}

func reasoningPart(text string) map[string]any {
	return map[string]any{"type": "reasoning_text", "text": text}
}

func textPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func messageItem(id, status string, parts ...any) outputItem {
	if parts == nil {
		parts = []any{}
	}
	return outputItem{"type": "message", "id": id, "role": "assistant", "status": status, "content": parts}
}

func (x *responsesExtra) functionCallItem(id, callID, name, args, status string) outputItem {
	it := outputItem{"type": "function_call", "id": id, "call_id": callID, "name": name, "arguments": args, "status": status}
	if ns := x.namespaces[name]; ns != "" {
		it["namespace"] = ns
	}
	return it
}

// responseObject is the response (in progress while streaming: no usage).
func (s *Server) responseObject(id string, created int64, r *responsesRequest, x *responsesExtra, output []outputItem, res *result) map[string]any {
	tools := r.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	var choice any = "auto"
	if tc := bytes.TrimSpace(r.ToolChoice); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		choice = json.RawMessage(tc)
	}
	var effort, summary any
	if r.Reasoning != nil && r.Reasoning.Effort != "" {
		effort = r.Reasoning.Effort
	}
	if sum := r.summary(); sum != "" {
		summary = sum
	}
	var format any = map[string]string{"type": "text"}
	if r.Text != nil && len(bytes.TrimSpace(r.Text.Format)) > 0 && !bytes.Equal(bytes.TrimSpace(r.Text.Format), []byte("null")) {
		format = r.Text.Format
	}
	if output == nil {
		output = []outputItem{}
	}
	o := map[string]any{"id": id, "object": "response", "created_at": created, "status": "in_progress", "model": s.o.ModelID,
		"output": output, "error": nil, "incomplete_details": nil, "instructions": r.Instructions,
		"max_output_tokens": r.MaxOutputTokens, "parallel_tool_calls": true, "previous_response_id": nil,
		"reasoning": map[string]any{"effort": effort, "summary": summary}, "store": false,
		"temperature": r.Temperature, "top_p": r.TopP, "text": map[string]any{"format": format},
		"tool_choice": choice, "tools": tools, "truncation": "disabled", "metadata": map[string]any{}, "usage": nil}
	if res != nil {
		o["status"] = "completed"
		if res.finish == "length" {
			o["status"], o["incomplete_details"] = "incomplete", map[string]string{"reason": "max_output_tokens"}
		}
		o["completed_at"] = time.Now().Unix()
		o["usage"] = map[string]any{"input_tokens": res.prompt, "output_tokens": len(res.ids), "total_tokens": res.prompt + len(res.ids),
			"input_tokens_details":  map[string]int{"cached_tokens": res.shown},
			"output_tokens_details": map[string]int{"reasoning_tokens": res.reasoningTokens}}
		if w := append(x.warnings[:len(x.warnings):len(x.warnings)], res.warnings...); len(w) > 0 {
			o["warnings"] = w // k3's own field, as in chat
		}
	}
	return o
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var rq responsesRequest
	var q openai.ChatRequest
	x := &responsesExtra{}
	j := &job{}
	id, created := newID("resp_"), time.Now().Unix()
	read := func() *openai.Error {
		if err := chatOfResponses(&rq, &q, x); err != nil {
			return err
		}
		for _, w := range x.warnings {
			s.logf("POST /v1/responses: %s", w)
		}
		return nil
	}
	s.chatEndpoint(w, r, "POST /v1/responses", &rq, &q, j, read, func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
		return s.streamResponse(ctx, cancel, w, p, j, &rq, x, id, created)
	}, func(res *result) any {
		var out []outputItem
		if res.reasoning != "" {
			out = append(out, reasoningItem(newID("rs_"), res.reasoning, rq.summary() != ""))
		}
		if res.content != "" || len(res.calls) == 0 {
			out = append(out, messageItem(newID("msg_"), "completed", textPart(res.content)))
		}
		for _, c := range res.calls {
			out = append(out, x.functionCallItem(newID("fc_"), newID("call_"), c.Function.Name, c.Function.Arguments, "completed"))
		}
		return s.responseObject(id, created, &rq, x, out, res)
	})
}

// streamResponse answers with the Responses events: response.created and
// response.in_progress, then per output item output_item.added, its
// content part and deltas as they are generated (reasoning_text,
// output_text; function call arguments when the reply is complete), the
// item's done events, and response.completed (or response.incomplete at
// the token cap) with the whole response. Every event has a
// sequence_number; SSE comments keep the connection alive meanwhile.
func (s *Server) streamResponse(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job, rq *responsesRequest, x *responsesExtra, id string, created int64) (*result, error) {
	e := openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer e.Quiet()
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		e.Event(typ, ev)
	}
	var output []outputItem
	send("response.created", map[string]any{"response": s.responseObject(id, created, rq, x, nil, nil)})
	if _, waiting := s.q.depth(); waiting > 0 {
		e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	send("response.in_progress", map[string]any{"response": s.responseObject(id, created, rq, x, nil, nil)})
	var itemID string
	summarised := rq.summary() != ""
	// summaryEvent is a reasoning_summary event of the open reasoning item's
	// one summary part
	summaryEvent := func(typ string, ev map[string]any) {
		ev["item_id"], ev["output_index"], ev["summary_index"] = itemID, len(output), 0
		send(typ, ev)
	}
	b := &blocks{
		open: func(kind string) {
			if kind == "reasoning" {
				itemID = newID("rs_")
				send("response.output_item.added", map[string]any{"output_index": len(output), "item": reasoningItem(itemID, "", summarised)})
				if summarised {
					summaryEvent("response.reasoning_summary_part.added", map[string]any{"part": summaryPart("")})
				}
				send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "part": reasoningPart("")})
				return
			}
			itemID = newID("msg_")
			send("response.output_item.added", map[string]any{"output_index": len(output), "item": messageItem(itemID, "in_progress")})
			send("response.content_part.added", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "part": textPart("")})
		},
		delta: func(kind, d string) {
			typ := "response.output_text.delta"
			ev := map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "delta": d}
			if kind == "reasoning" {
				typ = "response.reasoning_text.delta"
				if summarised {
					summaryEvent("response.reasoning_summary_text.delta", map[string]any{"delta": d})
				}
			} else {
				ev["logprobs"] = []any{}
			}
			send(typ, ev)
		},
		close: func(kind, text string) {
			var item outputItem
			if kind == "reasoning" {
				if summarised {
					summaryEvent("response.reasoning_summary_text.done", map[string]any{"text": text})
					summaryEvent("response.reasoning_summary_part.done", map[string]any{"part": summaryPart(text)})
				}
				send("response.reasoning_text.done", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "text": text})
				send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "part": reasoningPart(text)})
				item = reasoningItem(itemID, text, summarised)
			} else {
				send("response.output_text.done", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "text": text, "logprobs": []any{}})
				send("response.content_part.done", map[string]any{"item_id": itemID, "output_index": len(output), "content_index": 0, "part": textPart(text)})
				item = messageItem(itemID, "completed", textPart(text))
			}
			send("response.output_item.done", map[string]any{"output_index": len(output), "item": item})
			output = append(output, item)
		},
	}
	// response.in_progress again per keep-alive interval while a long
	// prompt is read, for agents' idle watchdogs
	hb := heartbeat{every: s.o.KeepAlive, last: time.Now()}
	res, err := b.generate(ctx, s, e, p, j, hb, func() {
		send("response.in_progress", map[string]any{"response": s.responseObject(id, created, rq, x, nil, nil)})
	}, func(ae *openai.Error) {
		send("error", map[string]any{"code": ae.Code, "message": ae.Message, "param": ae.Param})
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		fid, args := newID("fc_"), c.Function.Arguments
		item := x.functionCallItem(fid, newID("call_"), c.Function.Name, "", "in_progress")
		send("response.output_item.added", map[string]any{"output_index": len(output), "item": item})
		send("response.function_call_arguments.delta", map[string]any{"item_id": fid, "output_index": len(output), "delta": args})
		send("response.function_call_arguments.done", map[string]any{"item_id": fid, "output_index": len(output), "name": c.Function.Name, "arguments": args})
		done := x.functionCallItem(fid, item["call_id"].(string), c.Function.Name, args, "completed")
		send("response.output_item.done", map[string]any{"output_index": len(output), "item": done})
		output = append(output, done)
	}
	final := s.responseObject(id, created, rq, x, output, res)
	typ := "response.completed"
	if final["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	send(typ, map[string]any{"response": final})
	return res, nil
}
