// Package anthropic is the Anthropic Messages wire format k3 serves
// (POST /v1/messages, what Claude Code and the @anthropic-ai/sdk client
// speak): the request and its plain translation into the chat request
// (ToChat, request.go); the reply message, its content blocks, the stream
// events and errors in Anthropic's shape, with the plain translations from
// what the model wrote (stop reasons, tool inputs, error types). The content blocks
// and events list their fields in alphabetical order of their JSON names,
// the order the server wrote them in when it built them as maps, so the
// bytes on the wire are what they were.
package anthropic

import (
	"encoding/json"
	"net/http"
)

// Message is the reply message (and, with no content and only the input
// counted, the message of message_start).
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"` // "message"
	Role         string  `json:"role"` // "assistant"
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
	// Warnings say what of the model's output was read loosely (k3's own field).
	Warnings []string `json:"warnings,omitempty"`
}

// NewMessage is an assistant message with no content yet.
func NewMessage(id, model string, usage Usage) Message {
	return Message{ID: id, Type: "message", Role: "assistant", Model: model, Content: []Block{}, Usage: usage}
}

// Usage counts tokens as Anthropic does: input_tokens are the prompt
// positions read, cache_read_input_tokens those reused from an earlier
// request's state.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Block is a content block of the reply: a ThinkingBlock, a TextBlock or
// a ToolUseBlock.
type Block interface{ block() }

// ThinkingBlock is the model's thinking (k3 signs nothing: the signature
// is empty).
type ThinkingBlock struct {
	Signature string `json:"signature"`
	Thinking  string `json:"thinking"`
	Type      string `json:"type"` // "thinking"
}

// TextBlock is answer text.
type TextBlock struct {
	Text string `json:"text"`
	Type string `json:"type"` // "text"
}

// ToolUseBlock is one tool call; Input is a JSON object.
type ToolUseBlock struct {
	ID    string          `json:"id"`
	Input json.RawMessage `json:"input"`
	Name  string          `json:"name"`
	Type  string          `json:"type"` // "tool_use"
}

func (ThinkingBlock) block() {}
func (TextBlock) block()     {}
func (ToolUseBlock) block()  {}

// Thinking is a thinking block.
func Thinking(text string) ThinkingBlock { return ThinkingBlock{Type: "thinking", Thinking: text} }

// Text is a text block.
func Text(text string) TextBlock { return TextBlock{Type: "text", Text: text} }

// ToolUse is a tool_use block.
func ToolUse(id, name string, input json.RawMessage) ToolUseBlock {
	return ToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: input}
}

// Input is a call's arguments as a tool_use input: the arguments when they
// are a JSON object, else {}.
func Input(args string) json.RawMessage {
	var v map[string]any
	if json.Unmarshal([]byte(args), &v) != nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// StopReason is a reply's stop_reason and stop_sequence: max_tokens at the
// token cap (finish "length"), tool_use with calls, stop_sequence with the
// stop sequence that ended it (stopSeq), else end_turn.
func StopReason(finish string, calls int, stopSeq string) (*string, *string) {
	var reason string
	var seq *string
	switch {
	case finish == "length":
		reason = "max_tokens"
	case calls > 0:
		reason = "tool_use"
	case stopSeq != "":
		reason, seq = "stop_sequence", &stopSeq
	default:
		reason = "end_turn"
	}
	return &reason, seq
}

// The stream's events, each with its type.

// MessageStart is message_start.
type MessageStart struct {
	Message Message `json:"message"`
	Type    string  `json:"type"`
}

// BlockStart is content_block_start.
type BlockStart struct {
	ContentBlock Block  `json:"content_block"`
	Index        int    `json:"index"`
	Type         string `json:"type"`
}

// BlockDelta is content_block_delta; Delta is a TextDelta, ThinkingDelta
// or InputJSONDelta.
type BlockDelta struct {
	Delta any    `json:"delta"`
	Index int    `json:"index"`
	Type  string `json:"type"`
}

// TextDelta is a piece of answer text.
type TextDelta struct {
	Text string `json:"text"`
	Type string `json:"type"` // "text_delta"
}

// ThinkingDelta is a piece of the thinking.
type ThinkingDelta struct {
	Thinking string `json:"thinking"`
	Type     string `json:"type"` // "thinking_delta"
}

// InputJSONDelta is a piece of a tool_use input's JSON.
type InputJSONDelta struct {
	PartialJSON string `json:"partial_json"`
	Type        string `json:"type"` // "input_json_delta"
}

// BlockStop is content_block_stop.
type BlockStop struct {
	Index int    `json:"index"`
	Type  string `json:"type"`
}

// MessageDelta is message_delta: the stop reason and the usage.
type MessageDelta struct {
	Delta    StopDelta `json:"delta"`
	Type     string    `json:"type"`
	Usage    Usage     `json:"usage"`
	Warnings []string  `json:"warnings,omitempty"` // k3's own field
}

// StopDelta is message_delta's delta.
type StopDelta struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// Event is an event with nothing but its type: ping, message_stop.
type Event struct {
	Type string `json:"type"`
}

// ErrorResponse is an error as a response body or as the stream's error
// event: {"error": {"message", "type"}, "type": "error"}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
	Type  string    `json:"type"` // "error"
}

// ErrorBody is an error's message and Anthropic type.
type ErrorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// NewError is the error for an HTTP status with message.
func NewError(status int, message string) ErrorResponse {
	return ErrorResponse{Type: "error", Error: ErrorBody{Type: ErrorType(status), Message: message}}
}

// ErrorType is Anthropic's error type for an HTTP status.
func ErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// TokenCount is the answer of /v1/messages/count_tokens.
type TokenCount struct {
	InputTokens int `json:"input_tokens"`
}
