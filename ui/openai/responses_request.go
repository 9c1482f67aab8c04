package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// The Responses API's request (POST /v1/responses, stateless) and its
// plain translation into a ChatRequest: instructions and the input items
// (messages, function calls and their outputs, reasoning) become chat
// messages, function and namespace tools chat tools. Nothing is stored,
// so previous_response_id, conversation and item references are refused.

// ResponsesRequest is what k3 reads of a Responses request; other fields
// (store, include, metadata, truncation, user, ...) do not change the
// output and are ignored.
type ResponsesRequest struct {
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
	Reasoning          *ReasoningOptions `json:"reasoning"`
	Text               *TextOptions      `json:"text"`
}

// ReasoningOptions is a Responses request's reasoning.
type ReasoningOptions struct {
	Effort  string  `json:"effort"`
	Summary *string `json:"summary"`
	// GenerateSummary is summary's older name
	GenerateSummary *string `json:"generate_summary"`
}

// TextOptions is a Responses request's text: its format.
type TextOptions struct {
	Format json.RawMessage `json:"format"`
}

// Summary is the reasoning summary asked for ("" when none): K3 writes no
// separate summary, so with auto, concise or detailed the thinking itself
// is the reasoning item's one summary_text part (what clients that show
// only summaries, such as Codex CLI, display).
func (r *ResponsesRequest) Summary() string {
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

// InputItem is one input item (the fields of every type k3 reads).
type InputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// ResponsesExtra is what a Responses request says beyond the chat
// request: the namespace of each namespaced function, and what was left
// out.
type ResponsesExtra struct {
	Namespaces map[string]string // function name -> namespace
	Warnings   []string
}

// FunctionCall is a function_call output item; its namespace is the one
// its function was declared in.
func (x *ResponsesExtra) FunctionCall(id, callID, name, args, status string) *FunctionCallItem {
	return &FunctionCallItem{Type: "function_call", ID: id, CallID: callID, Name: name, Arguments: args, Status: status, Namespace: x.Namespaces[name]}
}

// ResponsesToChat reads a Responses request into the chat request, with
// what it says beyond it.
func ResponsesToChat(r *ResponsesRequest) (ChatRequest, ResponsesExtra, *Error) {
	var q ChatRequest
	var x ResponsesExtra
	if err := r.refused(); err != nil {
		return q, x, err
	}
	q.Model, q.Stream, q.MaxTokens, q.Temperature, q.TopP = r.Model, r.Stream, r.MaxOutputTokens, r.Temperature, r.TopP
	q.PromptCacheKey = r.PromptCacheKey
	if slices.Contains(r.Include, "message.output_text.logprobs") || r.TopLogprobs != nil && *r.TopLogprobs > 0 {
		q.Logprobs, q.TopLogprobs = json.RawMessage("true"), r.TopLogprobs
	}
	if err := r.options(&q); err != nil {
		return q, x, err
	}
	if r.Instructions != nil && *r.Instructions != "" {
		q.Messages = append(q.Messages, TextMessage("system", *r.Instructions))
	}
	if err := inputMessages(r.Input, &q); err != nil {
		return q, x, err
	}
	for i, t := range r.Tools {
		if err := x.tool(fmt.Sprintf("tools[%d]", i), t, "", &q); err != nil {
			return q, x, err
		}
	}
	choice, err := toolChoiceOf(r.ToolChoice)
	if err != nil {
		return q, x, err
	}
	q.ToolChoice, q.ParallelToolCalls = choice, r.ParallelToolCalls
	return q, x, nil
}

// refused names what a stateless server cannot do.
func (r *ResponsesRequest) refused() *Error {
	switch {
	case r.PreviousResponseID != nil && *r.PreviousResponseID != "":
		return BadRequest("previous_response_id", "this server stores no responses: send the whole conversation in input instead of previous_response_id")
	case !isNull(bytes.TrimSpace(r.Conversation)):
		return BadRequest("conversation", "this server stores no conversations: send the whole conversation in input")
	case r.Background:
		return BadRequest("background", "background responses are not supported")
	}
	return nil
}

// options reads max_output_tokens' floor, reasoning and text.format.
func (r *ResponsesRequest) options(q *ChatRequest) *Error {
	if r.MaxOutputTokens != nil && *r.MaxOutputTokens < 1 {
		return BadRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *r.MaxOutputTokens)
	}
	if r.Reasoning != nil {
		q.ReasoningEffort = r.Reasoning.Effort
		switch sum := r.Summary(); sum {
		case "", "auto", "concise", "detailed":
		default:
			return BadRequest("reasoning.summary", "reasoning.summary %q is not one of auto, concise, detailed", sum)
		}
	}
	if r.Text != nil {
		rf, err := responseFormatOf(r.Text.Format)
		if err != nil {
			return err
		}
		q.ResponseFormat = rf
	}
	return nil
}

// toolChoiceOf reads tool_choice: a string as it is, or {"type":
// "function", "name": ...} as chat's named choice.
func toolChoiceOf(raw json.RawMessage) (json.RawMessage, *Error) {
	tc := bytes.TrimSpace(raw)
	if len(tc) == 0 || tc[0] != '{' {
		return raw, nil
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(tc, &named) != nil || named.Type != "function" || named.Name == "" {
		return nil, BadRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}`)
	}
	return NamedChoice(named.Name), nil
}

// tool reads one tool declaration into q: a function, or a namespace of
// functions (each declared by its own name; its calls name the
// namespace). Tools the server would run itself (web_search, file_search,
// ...) and custom tools are left out with a warning: the model cannot
// call them here.
func (x *ResponsesExtra) tool(where string, t json.RawMessage, ns string, q *ChatRequest) *Error {
	var d struct {
		Type        string            `json:"type"`
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Parameters  json.RawMessage   `json:"parameters"`
		Strict      *bool             `json:"strict"`
		Tools       []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(t, &d); err != nil {
		return BadRequest("tools", "%s is not a tool object: %v", where, err)
	}
	switch {
	case d.Type == "function":
		ct, err := FunctionTool(d.Name, d.Description, d.Parameters, d.Strict)
		if err != nil {
			return BadRequest("tools", "%s: %v", where, err)
		}
		if ns != "" {
			if x.Namespaces == nil {
				x.Namespaces = map[string]string{}
			}
			x.Namespaces[d.Name] = ns
		}
		q.Tools = append(q.Tools, ct)
	case d.Type == "namespace" && ns == "":
		for i, nt := range d.Tools {
			if err := x.tool(fmt.Sprintf("%s.tools[%d]", where, i), nt, d.Name, q); err != nil {
				return err
			}
		}
	default:
		x.Warnings = append(x.Warnings, fmt.Sprintf("%s (type %q) was left out: this server offers function tools only", where, d.Type))
	}
	return nil
}

// responseFormatOf reads text.format into chat's response_format.
func responseFormatOf(raw json.RawMessage) (json.RawMessage, *Error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
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
		return nil, BadRequest("text.format", "text.format is not a format object: %v", err)
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
	return nil, BadRequest("text.format", "text.format.type %q is not one of text, json_object, json_schema", f.Type)
}

// inputMessages reads input (a string: one user message; or items) into
// chat messages. Consecutive reasoning, assistant text and function calls
// make one assistant message; a function call output is a tool message.
func inputMessages(raw json.RawMessage, q *ChatRequest) *Error {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return BadRequest("input", "input is required: a string or an array of items")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		q.Messages = append(q.Messages, TextMessage("user", text))
		return nil
	}
	var items []InputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return BadRequest("input", "input must be a string or an array of items")
	}
	in := inputReader{q: q, names: map[string]string{}}
	for i, it := range items {
		if err := in.item(i, it); err != nil {
			return err
		}
	}
	return nil
}

// inputReader reads input items into q's messages in order.
type inputReader struct {
	q     *ChatRequest
	names map[string]string // call_id -> function name
}

// item reads input[i] by its type (a message when only its role is given).
func (in *inputReader) item(i int, it InputItem) *Error {
	typ := it.Type
	if typ == "" && it.Role != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		return in.message(i, it)
	case "reasoning":
		return in.reasoning(i, it)
	case "function_call":
		return in.call(i, it)
	case "function_call_output":
		return in.output(i, it)
	case "item_reference":
		return BadRequest("input", "input[%d] is an item_reference: this server stores no items, send the item itself", i)
	}
	return BadRequest("input", "input[%d] is of type %q: only message, reasoning, function_call and function_call_output items are supported", i, typ)
}

// assistant returns the open assistant message (the last message, when it
// is one that fresh may still join), or starts one.
func (in *inputReader) assistant(fresh func(*Message) bool) *Message {
	q := in.q
	if n := len(q.Messages); n > 0 && q.Messages[n-1].Role == "assistant" && fresh(&q.Messages[n-1]) {
		return &q.Messages[n-1]
	}
	q.Messages = append(q.Messages, Message{Role: "assistant"})
	return &q.Messages[len(q.Messages)-1]
}

// textless says an assistant message has neither text nor calls yet.
func textless(m *Message) bool { return m.Content == "" && len(m.ToolCalls) == 0 }

// message reads a message item: with pictures its parts in order; else its
// text, an assistant's joining the open assistant message.
func (in *inputReader) message(i int, it InputItem) *Error {
	if parts, err := responsesParts(it.Content, i); err != nil {
		return BadRequest("input", "input[%d].content %v", i, err)
	} else if parts != nil && it.Role != "assistant" {
		m := TextMessage(it.Role, "")
		for _, p := range parts {
			m.Content += Content(p.Text)
		}
		m.Parts = parts
		in.q.Messages = append(in.q.Messages, m)
		return nil
	}
	t, err := TextOf(it.Content, "input_text", "output_text", "text")
	if err != nil {
		return BadRequest("input", "input[%d].content %v", i, err)
	}
	switch it.Role {
	case "user", "system", "developer":
		m := TextMessage(it.Role, t)
		m.Parts = TextParts(it.Content)
		in.q.Messages = append(in.q.Messages, m)
	case "assistant":
		m := in.assistant(textless)
		m.Content, m.Parts = Content(t), TextParts(it.Content)
	default:
		return BadRequest("input", "input[%d].role %q is not one of user, system, developer, assistant", i, it.Role)
	}
	return nil
}

// reasoning reads a reasoning item's reasoning_text parts into the open
// assistant message's reasoning.
func (in *inputReader) reasoning(i int, it InputItem) *Error {
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(it.Content, &parts); err != nil && !isNull(bytes.TrimSpace(it.Content)) {
		return BadRequest("input", "input[%d].content of a reasoning item must be an array of reasoning_text parts", i)
	}
	var r string
	for _, p := range parts {
		r += p.Text
	}
	m := in.assistant(textless)
	if m.ReasoningContent != nil {
		r = *m.ReasoningContent + r
	}
	m.ReasoningContent = &r
	return nil
}

// call reads a function_call into the open assistant message's calls.
func (in *inputReader) call(i int, it InputItem) *Error {
	if it.CallID == "" || it.Name == "" {
		return BadRequest("input", "input[%d]: a function_call needs call_id and name", i)
	}
	in.names[it.CallID] = it.Name
	m := in.assistant(func(*Message) bool { return true })
	args := it.Arguments
	if args == "" {
		args = "{}"
	}
	m.ToolCalls = append(m.ToolCalls, HistoryCall(it.CallID, it.Name, args))
	return nil
}

// output reads a function_call_output as a tool message, named after the
// call it answers.
func (in *inputReader) output(i int, it InputItem) *Error {
	name, ok := in.names[it.CallID]
	if !ok {
		return BadRequest("input", "input[%d]: function_call_output for call_id %q, which no function_call in input has", i, it.CallID)
	}
	out, err := TextOf(it.Output, "input_text", "output_text", "text")
	if err != nil {
		return BadRequest("input", "input[%d].output %v", i, err)
	}
	m := TextMessage("tool", out)
	m.ToolCallID, m.Name = it.CallID, name
	in.q.Messages = append(in.q.Messages, m)
	return nil
}

// responsesParts reads a message item's content when it holds an
// input_image part (nil otherwise): its text and image parts in order.
func responsesParts(raw json.RawMessage, item int) ([]ContentPart, error) {
	var ps []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		FileID   string `json:"file_id"`
	}
	if json.Unmarshal(raw, &ps) != nil {
		return nil, nil // a string, or not parts: TextOf says what is wrong
	}
	var out []ContentPart
	images := 0
	for k, p := range ps {
		switch p.Type {
		case "input_image":
			if p.ImageURL == "" {
				return nil, fmt.Errorf("[%d]: an input_image needs image_url (a data: URL); this server stores no files", k)
			}
			out = append(out, ContentPart{Image: true, ImageURL: p.ImageURL, Param: fmt.Sprintf("input[%d].content[%d].image_url", item, k)})
			images++
		case "input_text", "output_text", "text":
			out = append(out, ContentPart{Text: p.Text})
		default:
			return nil, nil // TextOf names the part it cannot take
		}
	}
	if images == 0 {
		return nil, nil
	}
	return out, nil
}
