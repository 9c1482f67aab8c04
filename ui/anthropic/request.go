package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"k3/ui/openai"
)

// The Messages request and its plain translation into the chat request of
// /v1/chat/completions (ToChat): system, the messages' text, image,
// tool_use, tool_result and thinking blocks, tools and tool_choice.
// thinking {"type": "enabled"} turns K3's thinking on (it is off without
// it, as in Anthropic's API; "adaptive" turns it on too) and
// budget_tokens or output_config.effort picks the effort.

// MessagesRequest is what k3 reads of a Messages request.
type MessagesRequest struct {
	Model         string            `json:"model"`
	System        json.RawMessage   `json:"system"`
	Messages      []MessageParam    `json:"messages"`
	MaxTokens     *int              `json:"max_tokens"`
	StopSequences []string          `json:"stop_sequences"`
	Stream        bool              `json:"stream"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    *ToolChoice       `json:"tool_choice"`
	Thinking      *ThinkingConfig   `json:"thinking"`
	OutputConfig  *OutputConfig     `json:"output_config"`
	OutputFormat  json.RawMessage   `json:"output_format"` // the structured-outputs beta's name
	// Metadata.UserID partitions the prompt cache, as prompt_cache_key
	Metadata *Metadata `json:"metadata"`
	// Anthropic's Messages API has no log-probabilities: the server
	// refuses them, as Anthropic's own refuses a field it does not have
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs json.RawMessage `json:"top_logprobs"`
}

// MessageParam is one message of the request; its content is a string or
// an array of content blocks.
type MessageParam struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// BlockParam is one content block of a request message (the fields of
// every type k3 reads).
type BlockParam struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Source    *ImageSource    `json:"source"`
}

// ImageSource is an image block's source.
type ImageSource struct {
	Type      string `json:"type"` // base64 or url
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

// ToolChoice is tool_choice: auto, any, tool (by name) or none.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// ThinkingConfig is thinking: enabled (with a budget), adaptive or
// disabled.
type ThinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// OutputConfig is output_config: the effort and a JSON schema format.
type OutputConfig struct {
	Effort string          `json:"effort"`
	Format json.RawMessage `json:"format"`
}

// Metadata is the request's metadata.
type Metadata struct {
	UserID string `json:"user_id"`
}

// ToChat reads a Messages request into the chat request, or refuses it
// naming the field. The stop sequences are left to the caller.
func ToChat(m *MessagesRequest) (openai.ChatRequest, *openai.Error) {
	var q openai.ChatRequest
	if m.MaxTokens == nil {
		return q, openai.BadRequest("max_tokens", "max_tokens is required")
	}
	if len(m.Messages) == 0 {
		return q, openai.BadRequest("messages", "messages must not be empty")
	}
	q.Model, q.Stream, q.MaxTokens = m.Model, m.Stream, m.MaxTokens
	if m.Metadata != nil {
		q.PromptCacheKey = m.Metadata.UserID
	}
	q.Temperature, q.TopP, q.TopK = m.Temperature, m.TopP, m.TopK
	for _, step := range []func(*openai.ChatRequest) *openai.Error{m.thinking, m.effort, m.system, m.messages, m.tools, m.outputFormat, m.toolChoice} {
		if err := step(&q); err != nil {
			return q, err
		}
	}
	return q, nil
}

// thinking reads thinking: off unless enabled or adaptive.
func (m *MessagesRequest) thinking(q *openai.ChatRequest) *openai.Error {
	q.Thinking = &openai.Thinking{Type: "disabled"}
	t := m.Thinking
	if t == nil {
		return nil
	}
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
	return nil
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

// effort reads output_config.effort when thinking is on.
func (m *MessagesRequest) effort(q *openai.ChatRequest) *openai.Error {
	oc := m.OutputConfig
	if oc == nil || oc.Effort == "" || q.Thinking.Type != "enabled" {
		return nil
	}
	switch oc.Effort {
	case "low", "medium", "high", "max":
		q.ReasoningEffort = oc.Effort // as reasoning_effort: medium is high
		return nil
	}
	return openai.BadRequest("output_config", "output_config.effort %q is not one of low, medium, high, max", oc.Effort)
}

// system reads system (text blocks one a line) as the first message.
func (m *MessagesRequest) system(q *openai.ChatRequest) *openai.Error {
	sys, err := openai.JoinText(m.System, "\n", "text")
	if err != nil {
		return openai.BadRequest("system", "system %v", err)
	}
	if sys != "" {
		q.Messages = append(q.Messages, openai.TextMessage("system", sys))
	}
	return nil
}

// messages reads the messages in order.
func (m *MessagesRequest) messages(q *openai.ChatRequest) *openai.Error {
	c := converter{q: q, names: map[string]string{}}
	for i, am := range m.Messages {
		if err := c.message(i, am); err != nil {
			return err
		}
	}
	return nil
}

// converter reads request messages into q's messages.
type converter struct {
	q     *openai.ChatRequest
	names map[string]string // tool_use id -> tool name
}

// message reads messages[i] by its role.
func (c *converter) message(i int, am MessageParam) *openai.Error {
	bs, err := blocksOf(am.Content)
	if err != nil {
		return openai.BadRequest("messages", "messages[%d].content %v", i, err)
	}
	switch am.Role {
	case "system": // mid-conversation system text (Claude Code sends it)
		t, err := openai.TextOf(am.Content, "text")
		if err != nil {
			return openai.BadRequest("messages", "messages[%d].content %v", i, err)
		}
		c.q.Messages = append(c.q.Messages, openai.TextMessage("system", t))
		return nil
	case "user":
		return c.user(i, bs)
	case "assistant":
		return c.assistant(i, bs)
	}
	return openai.BadRequest("messages", "messages[%d].role %q is not user, assistant or system", i, am.Role)
}

// blocksOf reads a message's content: a string is one text block.
func blocksOf(raw json.RawMessage) ([]BlockParam, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []BlockParam{{Type: "text", Text: s}}, nil
	}
	var bs []BlockParam
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, fmt.Errorf("must be a string or an array of content blocks")
	}
	return bs, nil
}

// user reads a user message: each tool_result a tool message, then the
// text and pictures as one user message (each text block its own segment).
func (c *converter) user(i int, bs []BlockParam) *openai.Error {
	var text strings.Builder
	var parts []openai.ContentPart
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
			if err := c.toolResult(i, k, b); err != nil {
				return err
			}
		default:
			return openai.BadRequest("messages", "messages[%d].content[%d] is of type %q: a user message may have text, image and tool_result blocks", i, k, b.Type)
		}
	}
	images := openai.HasImage(parts)
	if images || text.Len() > 0 || len(bs) == 0 {
		um := openai.TextMessage("user", text.String())
		if images || len(parts) > 1 {
			um.Parts = parts
		}
		c.q.Messages = append(c.q.Messages, um)
	}
	return nil
}

// imagePart is an image block as a chat content part: a base64 source as
// a data: URL, a url source as it is (refused: k3 fetches nothing).
func imagePart(b BlockParam, param string) (openai.ContentPart, error) {
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

// toolResult reads a tool_result block as a tool message named after the
// tool_use it answers.
func (c *converter) toolResult(i, k int, b BlockParam) *openai.Error {
	name, ok := c.names[b.ToolUseID]
	if !ok {
		return openai.BadRequest("messages", "messages[%d].content[%d]: tool_result for %q, which no tool_use before it has", i, k, b.ToolUseID)
	}
	out, err := openai.TextOf(b.Content, "text")
	if err != nil {
		return openai.BadRequest("messages", "messages[%d].content[%d].content %v", i, k, err)
	}
	tm := openai.TextMessage("tool", out)
	tm.ToolCallID, tm.Name = b.ToolUseID, name
	c.q.Messages = append(c.q.Messages, tm)
	return nil
}

// assistant reads an assistant message: its text, its thinking as the
// reasoning, its tool_use blocks as calls (redacted thinking is dropped).
func (c *converter) assistant(i int, bs []BlockParam) *openai.Error {
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
			c.names[b.ID] = b.Name
			a.ToolCalls = append(a.ToolCalls, openai.HistoryCall(b.ID, b.Name, arguments(b.Input)))
		default:
			return openai.BadRequest("messages", "messages[%d].content[%d] is of type %q: an assistant message may have text, thinking and tool_use blocks", i, k, b.Type)
		}
	}
	a.Content = openai.Content(text.String())
	if reasoning.Len() > 0 {
		r := reasoning.String()
		a.ReasoningContent = &r
	}
	c.q.Messages = append(c.q.Messages, a)
	return nil
}

// arguments is a tool_use input as a call's arguments ({} for none).
func arguments(input json.RawMessage) string {
	args := strings.TrimSpace(string(input))
	if args == "" || args == "null" {
		return "{}"
	}
	return args
}

// tools reads the client tools (name, description, input_schema).
func (m *MessagesRequest) tools(q *openai.ChatRequest) *openai.Error {
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
		ct, err := openai.FunctionTool(d.Name, d.Description, d.InputSchema, d.Strict)
		if err != nil {
			return openai.BadRequest("tools", "tools[%d]: %v", i, err)
		}
		q.Tools = append(q.Tools, ct)
	}
	return nil
}

// outputFormat reads output_config.format (or the beta's output_format),
// {"type": "json_schema", "schema": ...}, into a strict response_format:
// the answer is held to the schema, or the request is refused naming what
// cannot be held.
func (m *MessagesRequest) outputFormat(q *openai.ChatRequest) *openai.Error {
	raw, field := m.OutputFormat, "output_format"
	if oc := m.OutputConfig; oc != nil && !isNull(oc.Format) {
		raw, field = oc.Format, "output_config"
	}
	if isNull(raw) {
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

// isNull says whether raw JSON is absent: nothing, or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// toolChoice reads tool_choice: any is chat's required, tool names one
// function, disable_parallel_tool_use is parallel_tool_calls false.
func (m *MessagesRequest) toolChoice(q *openai.ChatRequest) *openai.Error {
	tc := m.ToolChoice
	if tc == nil {
		return nil
	}
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
		q.ToolChoice = openai.NamedChoice(tc.Name)
	default:
		return openai.BadRequest("tool_choice", "tool_choice.type %q is not one of auto, any, tool, none", tc.Type)
	}
	return nil
}
