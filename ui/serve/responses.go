package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k3/ui/openai"
)

// POST /v1/responses: OpenAI's Responses API, stateless. The request's
// input items (messages, function calls and their outputs, reasoning) and
// instructions become a chat request; the reply comes back as output items
// (reasoning, message, function calls), streamed as the Responses events or
// not. Nothing is stored, so previous_response_id is refused.

// responsesRequest is what k3 reads of a Responses request; other fields
// (store, metadata, truncation, user, ...) and other include values
// do not change the output and are ignored.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
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
	PromptCacheKey     string            `json:"prompt_cache_key"`
	TopLogprobs        *int              `json:"top_logprobs"`
	Include            []string          `json:"include"`
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
		Strict      *bool             `json:"strict"`
		Tools       []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(t, &d); err != nil {
		return openai.BadRequest("tools", "%s is not a tool object: %v", where, err)
	}
	switch {
	case d.Type == "function":
		ct, err := chatTool(d.Name, d.Description, d.Parameters, d.Strict)
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
	}
	if slices.Contains(r.Include, "message.output_text.logprobs") || r.TopLogprobs != nil && *r.TopLogprobs > 0 {
		q.Logprobs, q.TopLogprobs = json.RawMessage("true"), r.TopLogprobs
	}
	q.Model, q.Stream, q.MaxTokens, q.Temperature, q.TopP = r.Model, r.Stream, r.MaxOutputTokens, r.Temperature, r.TopP
	q.PromptCacheKey = r.PromptCacheKey
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
	q.ParallelToolCalls = r.ParallelToolCalls
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
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return openai.BadRequest("input", "input is required: a string or an array of items")
	}
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
			if parts, err := responsesParts(it.Content, i); err != nil {
				return openai.BadRequest("input", "input[%d].content %v", i, err)
			} else if parts != nil && it.Role != "assistant" {
				m := msg(it.Role, "")
				for _, p := range parts {
					m.Content += openai.Content(p.Text)
				}
				m.Parts = parts
				q.Messages = append(q.Messages, m)
				continue
			}
			t, err := textOf(it.Content, "input_text", "output_text", "text")
			if err != nil {
				return openai.BadRequest("input", "input[%d].content %v", i, err)
			}
			switch it.Role {
			case "user", "system", "developer":
				m := msg(it.Role, t)
				m.Parts = textPartsOf(it.Content)
				q.Messages = append(q.Messages, m)
			case "assistant":
				m := assistant(func(m *openai.Message) bool { return m.Content == "" && len(m.ToolCalls) == 0 })
				m.Content, m.Parts = openai.Content(t), textPartsOf(it.Content)
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

func (x *responsesExtra) functionCallItem(id, callID, name, args, status string) *openai.FunctionCallItem {
	return &openai.FunctionCallItem{Type: "function_call", ID: id, CallID: callID, Name: name, Arguments: args, Status: status, Namespace: x.namespaces[name]}
}

// responseObject is the response (in progress while streaming: no usage).
func (s *Server) responseObject(id string, created int64, r *responsesRequest, x *responsesExtra, output []openai.OutputItem, res *result) *openai.Response {
	tools := r.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	choice := json.RawMessage(`"auto"`)
	if tc := bytes.TrimSpace(r.ToolChoice); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		choice = tc
	}
	var reasoning openai.ReasoningConfig
	if r.Reasoning != nil && r.Reasoning.Effort != "" {
		reasoning.Effort = &r.Reasoning.Effort
	}
	if sum := r.summary(); sum != "" {
		reasoning.Summary = &sum
	}
	format := json.RawMessage(`{"type":"text"}`)
	if r.Text != nil && len(bytes.TrimSpace(r.Text.Format)) > 0 && !bytes.Equal(bytes.TrimSpace(r.Text.Format), []byte("null")) {
		format = r.Text.Format
	}
	if output == nil {
		output = []openai.OutputItem{}
	}
	o := &openai.Response{ID: id, Object: "response", CreatedAt: created, Status: "in_progress", Model: s.o.ModelID,
		Output: output, Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		Reasoning: reasoning, Temperature: r.Temperature, TopP: r.TopP, Text: openai.TextConfig{Format: format},
		ToolChoice: choice, Tools: tools, Truncation: "disabled", Metadata: map[string]string{}}
	if res != nil {
		o.Status = "completed"
		if res.finish == "length" {
			o.Status, o.IncompleteDetails = "incomplete", &openai.IncompleteDetails{Reason: "max_output_tokens"}
		}
		done := time.Now().Unix()
		o.CompletedAt = &done
		o.Usage = openai.NewResponseUsage(res.prompt, len(res.ids), res.shown, res.reasoningTokens)
		o.Warnings = append(x.warnings[:len(x.warnings):len(x.warnings)], res.warnings...)
	}
	return o
}

// responseOutput is a complete reply's output items: the thinking, the
// answer (also when empty, unless there are calls) and the calls.
func (x *responsesExtra) responseOutput(res *result, summarised bool, lp json.RawMessage) []openai.OutputItem {
	var out []openai.OutputItem
	if res.reasoning != "" {
		out = append(out, openai.NewReasoningItem(newID("rs_"), res.reasoning, summarised))
	}
	if res.content != "" || len(res.calls) == 0 {
		text := openai.NewOutputText(res.content)
		text.Logprobs = lp
		out = append(out, openai.NewMessageItem(newID("msg_"), "completed", text))
	}
	for _, c := range res.calls {
		out = append(out, x.functionCallItem(newID("fc_"), newID("call_"), c.Function.Name, c.Function.Arguments, "completed"))
	}
	return out
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
	s.handle(w, r, endpoint{name: "POST /v1/responses", body: &rq, j: j, checks: s.chatChecks(&q, j, read), stream: &q.Stream,
		streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
			st := &responseStream{s: s, rq: &rq, x: x, id: id, created: created, summarised: rq.summary() != ""}
			return st.run(ctx, cancel, w, p, j)
		},
		reply: func(res *result) any {
			return s.responseObject(id, created, &rq, x, x.responseOutput(res, rq.summary() != "", s.replyLogprobs(res)), res)
		}})
}

// responseStream writes one response as the Responses events: every event
// numbered in order, each output item's events with its index.
type responseStream struct {
	s          *Server
	e          *openai.SSE
	rq         *responsesRequest
	x          *responsesExtra
	id         string
	created    int64
	summarised bool
	j          *job
	seq        int                 // the next event's sequence_number
	output     []openai.OutputItem // the items done so far
	itemID     string              // the open item's id
}

// next is the next sequence number.
func (st *responseStream) next() int {
	st.seq++
	return st.seq - 1
}

// send writes one event; typ is also its event name.
func (st *responseStream) send(typ string, ev any) { st.e.Event(typ, ev) }

// inProgress sends response.created or response.in_progress: the response
// before its output.
func (st *responseStream) inProgress(typ string) {
	st.send(typ, openai.ResponseEvent{Type: typ, SequenceNumber: st.next(), Response: st.s.responseObject(st.id, st.created, st.rq, st.x, nil, nil)})
}

func (st *responseStream) item(typ string, it openai.OutputItem) {
	st.send(typ, openai.OutputItemEvent{Type: typ, SequenceNumber: st.next(), OutputIndex: len(st.output), Item: it})
}

func (st *responseStream) part(typ string, part any) {
	st.send(typ, openai.ContentPartEvent{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Part: part})
}

func (st *responseStream) summaryPart(typ, text string) {
	st.send(typ, openai.SummaryPartEvent{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Part: openai.SummaryText(text)})
}

// open starts a reasoning or message item.
func (st *responseStream) open(kind string) {
	if kind == "reasoning" {
		st.itemID = newID("rs_")
		st.item("response.output_item.added", openai.NewReasoningItem(st.itemID, "", st.summarised))
		if st.summarised {
			st.summaryPart("response.reasoning_summary_part.added", "")
		}
		st.part("response.content_part.added", openai.ReasoningText(""))
		return
	}
	st.itemID = newID("msg_")
	st.item("response.output_item.added", openai.NewMessageItem(st.itemID, "in_progress"))
	st.part("response.content_part.added", openai.NewOutputText(""))
}

// delta sends a piece of the open item's text.
func (st *responseStream) delta(kind, d string) {
	ev := openai.TextDelta{Type: "response.output_text.delta", ItemID: st.itemID, OutputIndex: len(st.output), Delta: d, Logprobs: openai.EmptyList}
	if kind == "reasoning" {
		ev.Type, ev.Logprobs = "response.reasoning_text.delta", nil
	} else {
		ev.Logprobs = st.s.textLogprobs(st.j, false)
	}
	if kind == "reasoning" {
		if st.summarised {
			const typ = "response.reasoning_summary_text.delta"
			st.send(typ, openai.SummaryTextDelta{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Delta: d})
		}
	}
	ev.SequenceNumber = st.next()
	st.send(ev.Type, ev)
}

// close ends the open item with its whole text.
func (st *responseStream) close(kind, text string) {
	var item openai.OutputItem
	done := openai.TextDone{Type: "response.output_text.done", ItemID: st.itemID, OutputIndex: len(st.output), Text: text, Logprobs: openai.EmptyList}
	if kind == "reasoning" {
		if st.summarised {
			const typ = "response.reasoning_summary_text.done"
			st.send(typ, openai.SummaryTextDone{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Text: text})
			st.summaryPart("response.reasoning_summary_part.done", text)
		}
		done.Type, done.Logprobs = "response.reasoning_text.done", nil
		done.SequenceNumber = st.next()
		st.send(done.Type, done)
		st.part("response.content_part.done", openai.ReasoningText(text))
		item = openai.NewReasoningItem(st.itemID, text, st.summarised)
	} else {
		part := openai.NewOutputText(text)
		part.Logprobs = st.s.textLogprobs(st.j, true)
		done.SequenceNumber, done.Logprobs = st.next(), part.Logprobs
		st.send(done.Type, done)
		st.part("response.content_part.done", part)
		item = openai.NewMessageItem(st.itemID, "completed", part)
	}
	st.item("response.output_item.done", item)
	st.output = append(st.output, item)
}

// call sends one function call item with its arguments.
func (st *responseStream) call(name, args string) {
	fid := newID("fc_")
	item := st.x.functionCallItem(fid, newID("call_"), name, "", "in_progress")
	st.item("response.output_item.added", item)
	const delta, done = "response.function_call_arguments.delta", "response.function_call_arguments.done"
	st.send(delta, openai.ArgumentsDelta{Type: delta, SequenceNumber: st.next(), ItemID: fid, OutputIndex: len(st.output), Delta: args})
	st.send(done, openai.ArgumentsDone{Type: done, SequenceNumber: st.next(), ItemID: fid, OutputIndex: len(st.output), Name: name, Arguments: args})
	fin := st.x.functionCallItem(fid, item.CallID, name, args, "completed")
	st.item("response.output_item.done", fin)
	st.output = append(st.output, fin)
}

// run answers with the Responses events: response.created and
// response.in_progress, then per output item output_item.added, its
// content part and deltas as they are generated (reasoning_text,
// output_text; function call arguments when the reply is complete), the
// item's done events, and response.completed (or response.incomplete at
// the token cap) with the whole response. Every event has a
// sequence_number; SSE comments keep the connection alive meanwhile.
func (st *responseStream) run(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job) (*result, error) {
	s := st.s
	st.j = j
	st.e = openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer st.e.Quiet()
	st.inProgress("response.created")
	if _, waiting := s.q.depth(); waiting > 0 {
		st.e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	st.inProgress("response.in_progress")
	b := &blocks{open: st.open, delta: st.delta, close: st.close}
	// response.in_progress again per keep-alive interval while a long
	// prompt is read, for agents' idle watchdogs
	hb := heartbeat{every: s.o.KeepAlive, last: time.Now()}
	res, err := b.generate(ctx, s, st.e, p, j, hb, func() { st.inProgress("response.in_progress") }, func(ae *openai.Error) {
		st.send("error", openai.ErrorEvent{Type: "error", SequenceNumber: st.next(), Code: ae.Code, Message: ae.Message, Param: ae.Param})
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		st.call(c.Function.Name, c.Function.Arguments)
	}
	final := s.responseObject(st.id, st.created, st.rq, st.x, st.output, res)
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	st.send(typ, openai.ResponseEvent{Type: typ, SequenceNumber: st.next(), Response: final})
	return res, nil
}

// responsesParts reads a message item's content when it holds an
// input_image part (nil otherwise): its text and image parts in order.
func responsesParts(raw json.RawMessage, item int) ([]openai.ContentPart, error) {
	var ps []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
	}
	if json.Unmarshal(raw, &ps) != nil {
		return nil, nil // a string, or not parts: textOf says what is wrong
	}
	var out []openai.ContentPart
	images := 0
	for k, p := range ps {
		switch p.Type {
		case "input_image":
			if p.ImageURL == "" {
				return nil, fmt.Errorf("[%d]: an input_image needs image_url (a data: URL); this server stores no files", k)
			}
			out = append(out, openai.ContentPart{Image: true, ImageURL: p.ImageURL, Param: fmt.Sprintf("input[%d].content[%d].image_url", item, k)})
			images++
		case "input_text", "output_text", "text":
			out = append(out, openai.ContentPart{Text: p.Text})
		default:
			return nil, nil // textOf names the part it cannot take
		}
	}
	if images == 0 {
		return nil, nil
	}
	return out, nil
}
