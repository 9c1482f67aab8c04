package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k3/tokenizer/xtml"
)

// The small pieces the translations of other dialects into a ChatRequest
// share: the Responses input (responses_request.go) and the Anthropic
// Messages request (ui/anthropic) both read content, tools and
// tool_choice into the chat request with these.

// TextMessage is a chat request message with text content.
func TextMessage(role, text string) Message {
	return Message{Role: role, Content: Content(text)}
}

// HistoryCall is a tool call of the conversation's history.
func HistoryCall(id, name, args string) xtml.ToolCall {
	return xtml.ToolCall{ID: id, Type: "function", Function: xtml.FunctionCall{Name: name, Arguments: args}}
}

// FunctionTool is a tool declaration in the chat format the renderer
// reads: {"type": "function", "function": {name, description,
// parameters, strict}}, the empty ones left out.
func FunctionTool(name, description string, parameters json.RawMessage, strict *bool) (json.RawMessage, error) {
	if name == "" {
		return nil, fmt.Errorf("a tool has no name")
	}
	f := map[string]any{"name": name}
	if description != "" {
		f["description"] = description
	}
	if p := bytes.TrimSpace(parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		f["parameters"] = json.RawMessage(p)
	}
	if strict != nil && *strict { // held strictly (constrain.ToolSchemas); false is the default
		f["strict"] = true
	}
	return json.Marshal(map[string]any{"type": "function", "function": f})
}

// NamedChoice is a chat tool_choice naming one function.
func NamedChoice(name string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
	return b
}

// TextOf reads a string, or an array of parts of the given types each
// with a "text", into one string (null or nothing is "").
func TextOf(raw json.RawMessage, types ...string) (string, error) {
	return JoinText(raw, "", types...)
}

// JoinText is TextOf with sep between the parts.
func JoinText(raw json.RawMessage, sep string, types ...string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("must be a string or an array of %s parts", strings.Join(types, "/"))
	}
	var b strings.Builder
	for i, p := range parts {
		if !slices.Contains(types, p.Type) || p.Text == nil {
			return "", fmt.Errorf("part %d is of type %q: only %s parts are supported", i, p.Type, strings.Join(types, "/"))
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// TextParts is an array content's parts (TextOf checked their types), each
// rendered as its own segment as Moonshot's encoder does; nil for a string.
func TextParts(raw json.RawMessage) []ContentPart {
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	out := make([]ContentPart, len(parts))
	for i, p := range parts {
		out[i] = ContentPart{Text: p.Text}
	}
	return out
}

// HasImage says whether any of ps is a picture.
func HasImage(ps []ContentPart) bool {
	for _, p := range ps {
		if p.Image {
			return true
		}
	}
	return false
}

// isNull says whether trimmed JSON is absent: nothing, or null.
func isNull(raw []byte) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}
