package openai

import "encoding/json"

// The Responses API's reply and stream events, as k3 serves them. Every
// struct lists its fields in alphabetical order of their JSON names: the
// order the server wrote them in when it built these objects as maps, so
// the bytes on the wire are what they were.

// EmptyList is a JSON [] for the lists a client appends to, which must be
// present even when empty (annotations, logprobs).
var EmptyList = json.RawMessage("[]")

// Response is a Responses API response object. CompletedAt, Usage and
// Warnings are set once the reply is complete; while it streams the
// status is "in_progress".
type Response struct {
	CompletedAt        *int64             `json:"completed_at,omitempty"`
	CreatedAt          int64              `json:"created_at"`
	Error              *Error             `json:"error"`
	ID                 string             `json:"id"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Object             string             `json:"object"` // "response"
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          ReasoningConfig    `json:"reasoning"`
	Status             string             `json:"status"` // in_progress, completed, incomplete
	Store              bool               `json:"store"`
	Temperature        *float64           `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopP               *float64           `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	// Warnings say what was left out of the request or read loosely in
	// the model's output (k3's own field, as in chat completions).
	Warnings []string `json:"warnings,omitempty"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"` // max_output_tokens
}

// ReasoningConfig echoes the request's reasoning options (null when not given).
type ReasoningConfig struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// TextConfig echoes the request's text format ({"type": "text"} by default).
type TextConfig struct {
	Format json.RawMessage `json:"format"`
}

// ResponseUsage counts a response's tokens.
type ResponseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  CachedTokens   `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails ReasoningCount `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// CachedTokens counts the prompt positions reused.
type CachedTokens struct {
	CachedTokens int `json:"cached_tokens"`
}

// ReasoningCount counts the thinking's tokens.
type ReasoningCount struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// NewResponseUsage counts prompt and output tokens, of which cached were
// reused and reasoning were thinking.
func NewResponseUsage(prompt, output, cached, reasoning int) *ResponseUsage {
	return &ResponseUsage{InputTokens: prompt, OutputTokens: output, TotalTokens: prompt + output,
		InputTokensDetails: CachedTokens{cached}, OutputTokensDetails: ReasoningCount{reasoning}}
}

// OutputItem is one item of a response's output: a *ReasoningItem, a
// *MessageItem or a *FunctionCallItem.
type OutputItem interface{ outputItem() }

// ReasoningItem is the thinking: its text as one reasoning_text part and,
// when a summary was asked for, as one summary_text part too.
type ReasoningItem struct {
	Content []TextPart `json:"content"`
	ID      string     `json:"id"`
	Summary []TextPart `json:"summary"`
	Type    string     `json:"type"` // "reasoning"
}

// MessageItem is the answer: one output_text part (none while it is
// opened in a stream).
type MessageItem struct {
	Content []OutputText `json:"content"`
	ID      string       `json:"id"`
	Role    string       `json:"role"`   // "assistant"
	Status  string       `json:"status"` // in_progress, completed
	Type    string       `json:"type"`   // "message"
}

// FunctionCallItem is one tool call. Namespace is the namespace a
// namespaced function was declared in.
type FunctionCallItem struct {
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Status    string `json:"status"` // in_progress, completed
	Type      string `json:"type"`   // "function_call"
}

func (*ReasoningItem) outputItem()    {}
func (*MessageItem) outputItem()      {}
func (*FunctionCallItem) outputItem() {}

// TextPart is a reasoning_text or summary_text part.
type TextPart struct {
	Text string `json:"text"`
	Type string `json:"type"`
}

// OutputText is an answer's output_text part.
type OutputText struct {
	Annotations json.RawMessage `json:"annotations"`
	Logprobs    json.RawMessage `json:"logprobs"`
	Text        string          `json:"text"`
	Type        string          `json:"type"` // "output_text"
}

// NewReasoningItem is the thinking text as a reasoning item; summarised
// also gives it as the one summary part. Empty text has no parts.
func NewReasoningItem(id, text string, summarised bool) *ReasoningItem {
	it := &ReasoningItem{ID: id, Type: "reasoning", Content: []TextPart{}, Summary: []TextPart{}}
	if text != "" {
		it.Content = append(it.Content, ReasoningText(text))
		if summarised {
			it.Summary = append(it.Summary, SummaryText(text))
		}
	}
	return it
}

// NewMessageItem is an assistant message item with the given parts.
func NewMessageItem(id, status string, parts ...OutputText) *MessageItem {
	if parts == nil {
		parts = []OutputText{}
	}
	return &MessageItem{ID: id, Type: "message", Role: "assistant", Status: status, Content: parts}
}

// ReasoningText is a reasoning_text part.
func ReasoningText(text string) TextPart { return TextPart{Type: "reasoning_text", Text: text} }

// SummaryText is a summary_text part.
func SummaryText(text string) TextPart { return TextPart{Type: "summary_text", Text: text} }

// NewOutputText is an output_text part with no annotations or logprobs.
func NewOutputText(text string) OutputText {
	return OutputText{Type: "output_text", Text: text, Annotations: EmptyList, Logprobs: EmptyList}
}

// The stream's events. Every event has its type and a sequence number.

// ResponseEvent is response.created, response.in_progress,
// response.completed or response.incomplete.
type ResponseEvent struct {
	Response       *Response `json:"response"`
	SequenceNumber int       `json:"sequence_number"`
	Type           string    `json:"type"`
}

// OutputItemEvent is response.output_item.added or .done.
type OutputItemEvent struct {
	Item           OutputItem `json:"item"`
	OutputIndex    int        `json:"output_index"`
	SequenceNumber int        `json:"sequence_number"`
	Type           string     `json:"type"`
}

// ContentPartEvent is response.content_part.added or .done; Part is a
// TextPart (reasoning) or an OutputText.
type ContentPartEvent struct {
	ContentIndex   int    `json:"content_index"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Part           any    `json:"part"`
	SequenceNumber int    `json:"sequence_number"`
	Type           string `json:"type"`
}

// SummaryPartEvent is response.reasoning_summary_part.added or .done.
type SummaryPartEvent struct {
	ItemID         string   `json:"item_id"`
	OutputIndex    int      `json:"output_index"`
	Part           TextPart `json:"part"`
	SequenceNumber int      `json:"sequence_number"`
	SummaryIndex   int      `json:"summary_index"`
	Type           string   `json:"type"`
}

// SummaryTextDelta is response.reasoning_summary_text.delta.
type SummaryTextDelta struct {
	Delta          string `json:"delta"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int    `json:"sequence_number"`
	SummaryIndex   int    `json:"summary_index"`
	Type           string `json:"type"`
}

// SummaryTextDone is response.reasoning_summary_text.done.
type SummaryTextDone struct {
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int    `json:"sequence_number"`
	SummaryIndex   int    `json:"summary_index"`
	Text           string `json:"text"`
	Type           string `json:"type"`
}

// TextDelta is response.output_text.delta (with Logprobs, EmptyList) or
// response.reasoning_text.delta (without).
type TextDelta struct {
	ContentIndex   int             `json:"content_index"`
	Delta          string          `json:"delta"`
	ItemID         string          `json:"item_id"`
	Logprobs       json.RawMessage `json:"logprobs,omitempty"`
	OutputIndex    int             `json:"output_index"`
	SequenceNumber int             `json:"sequence_number"`
	Type           string          `json:"type"`
}

// TextDone is response.output_text.done (with Logprobs) or
// response.reasoning_text.done (without).
type TextDone struct {
	ContentIndex   int             `json:"content_index"`
	ItemID         string          `json:"item_id"`
	Logprobs       json.RawMessage `json:"logprobs,omitempty"`
	OutputIndex    int             `json:"output_index"`
	SequenceNumber int             `json:"sequence_number"`
	Text           string          `json:"text"`
	Type           string          `json:"type"`
}

// ArgumentsDelta is response.function_call_arguments.delta.
type ArgumentsDelta struct {
	Delta          string `json:"delta"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int    `json:"sequence_number"`
	Type           string `json:"type"`
}

// ArgumentsDone is response.function_call_arguments.done.
type ArgumentsDone struct {
	Arguments      string `json:"arguments"`
	ItemID         string `json:"item_id"`
	Name           string `json:"name"`
	OutputIndex    int    `json:"output_index"`
	SequenceNumber int    `json:"sequence_number"`
	Type           string `json:"type"`
}

// ErrorEvent is the stream's error event.
type ErrorEvent struct {
	Code           any    `json:"code"`
	Message        string `json:"message"`
	Param          any    `json:"param"`
	SequenceNumber int    `json:"sequence_number"`
	Type           string `json:"type"` // "error"
}
