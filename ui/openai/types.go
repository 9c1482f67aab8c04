// Package openai is the OpenAI wire format k3 speaks, as a server (ui/serve)
// and as a client (ui/remote): the request, response and stream chunk
// types, errors in OpenAI's shape, and server-sent events written and read.
// One list of fields, so the app's own server and the app's own client
// agree on reasoning_content and reasoning, tool-call deltas and usage.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"k3/tokenizer/xtml"
)

// Content is a message's content. It is read from a string, null or an
// array of parts of which only text parts are understood (joined here;
// Message.Parts keeps them apart), and written as a string.
type Content string

// UnmarshalJSON reads a string, null or an array of text parts.
func (c *Content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*c = ""
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		err := json.Unmarshal(data, &s)
		*c = Content(s)
		return err
	case len(data) > 0 && data[0] == '[':
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		var b strings.Builder
		for i, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return errorf("content part %d is of type %q: only text parts are supported", i, p.Type)
			}
			b.WriteString(*p.Text)
		}
		*c = Content(b.String())
		return nil
	}
	return errors.New("content must be a string, null or an array of text parts")
}

// Message is one request message. Reasoning is vLLM's newer name for
// reasoning_content.
type Message struct {
	Role             string          `json:"role"`
	Content          Content         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Reasoning        *string         `json:"reasoning,omitempty"`
	Name             string          `json:"name,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ToolCalls        []xtml.ToolCall `json:"tool_calls,omitempty"`
	// Parts is an array content's parts (text, pictures), in order
	// (parts.go); nil for a string content.
	Parts []ContentPart `json:"-"`
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// TemplateKwargs are chat_template_kwargs: the reference renderer's
// thinking and thinking_effort (enable_thinking is another name for
// thinking).
type TemplateKwargs struct {
	Thinking       *bool   `json:"thinking,omitempty"`
	EnableThinking *bool   `json:"enable_thinking,omitempty"`
	ThinkingEffort *string `json:"thinking_effort,omitempty"`
}

// Sampling are the request fields every generation endpoint shares.
type Sampling struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	TopK                *int            `json:"top_k,omitempty"`
	Seed                *int64          `json:"seed,omitempty"`
	Stop                json.RawMessage `json:"stop,omitempty"`
	N                   *int            `json:"n,omitempty"`
	Logprobs            json.RawMessage `json:"logprobs,omitempty"`
	TopLogprobs         *int            `json:"top_logprobs,omitempty"`
	// penalties and logit_bias (engine.Penalties: applied exactly)
	FrequencyPenalty  *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty   *float64           `json:"presence_penalty,omitempty"`
	RepetitionPenalty *float64           `json:"repetition_penalty,omitempty"`
	LogitBias         map[string]float64 `json:"logit_bias,omitempty"`
	// PromptCacheKey keeps this client's prompt-cache snapshots apart from
	// other clients' (a server partitions its cache by it).
	PromptCacheKey string `json:"prompt_cache_key,omitempty"`
	// ReturnTokenIDs adds prompt_token_ids and the choice's token_ids to
	// the response (as vLLM does).
	ReturnTokenIDs bool `json:"return_token_ids,omitempty"`
}

// Thinking is Moonshot's own switch: {"type": "enabled"|"disabled"}.
type Thinking struct {
	Type string `json:"type"`
}

// ChatRequest is POST /v1/chat/completions.
type ChatRequest struct {
	Sampling
	Messages           []Message         `json:"messages"`
	Tools              []json.RawMessage `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ResponseFormat     json.RawMessage   `json:"response_format,omitempty"`
	ReasoningEffort    string            `json:"reasoning_effort,omitempty"`
	ChatTemplateKwargs *TemplateKwargs   `json:"chat_template_kwargs,omitempty"`
	Thinking           *Thinking         `json:"thinking,omitempty"`
	// ParallelToolCalls false: a required call is one call (default: the
	// model may write several, each held to its tool's schema)
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`
}

// CompletionRequest is POST /v1/completions.
type CompletionRequest struct {
	Sampling
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo,omitempty"`
	// SkipSpecialTokens false keeps control-token strings (<|open|>, ...)
	// in the text; by default they are left out, as vLLM does.
	SkipSpecialTokens *bool `json:"skip_special_tokens,omitempty"`
}

// TokensDetails is usage.prompt_tokens_details.
type TokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Usage is the token count of a reply. cached_tokens are the prompt
// positions the server did not read again.
type Usage struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *TokensDetails `json:"prompt_tokens_details,omitempty"`
	// CompletionTokensDetails: chat replies only (a completion has no channels)
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// CompletionTokensDetails counts the reply's think-channel text tokens.
type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// NewUsage is the usage of a reply of completion tokens to a prompt of
// which cached positions were not read again.
func NewUsage(prompt, completion, cached int) *Usage {
	return &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: &TokensDetails{CachedTokens: cached}}
}

// ToolCall is a tool call in a response; Index is set only in stream
// deltas, where a call may come in pieces told apart by it.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function: its name and its arguments as a
// JSON string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Delta is a stream chunk's message. Reasoning is vLLM's newer name for
// reasoning_content (read, never written by k3).
type Delta struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content,omitempty"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Reasoning        *string    `json:"reasoning,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ResponseMessage is a non-streamed choice's message: content is always
// present (null with tool calls and no text), as OpenAI writes it.
type ResponseMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// ChatChoice is a non-streamed chat choice.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      ResponseMessage `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     any             `json:"logprobs"`
	TokenIDs     []int           `json:"token_ids,omitempty"`
}

// ChatResponse is a non-streamed chat completion.
type ChatResponse struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int64        `json:"created"`
	Model          string       `json:"model"`
	Choices        []ChatChoice `json:"choices"`
	Usage          *Usage       `json:"usage"`
	PromptTokenIDs []int        `json:"prompt_token_ids,omitempty"`
	// Warnings say what of the model's output was read loosely, or what the
	// request asked that was not done (k3's own field).
	Warnings []string `json:"warnings,omitempty"`
}

// ChunkChoice is a stream chunk's choice.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
	Logprobs     any     `json:"logprobs"`
}

// ChatChunk is one event of a streamed chat completion. A server that
// fails mid-stream sends an event with only Error.
type ChatChunk struct {
	ID       string        `json:"id,omitempty"`
	Object   string        `json:"object,omitempty"`
	Created  int64         `json:"created,omitempty"`
	Model    string        `json:"model,omitempty"`
	Choices  []ChunkChoice `json:"choices"`
	Usage    *Usage        `json:"usage,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
	Error    *Error        `json:"error,omitempty"`
}

// CompletionChoice is a completion's choice (streamed or not).
type CompletionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
	Logprobs     any     `json:"logprobs"`
	TokenIDs     []int   `json:"token_ids,omitempty"`
}

// CompletionResponse is a completion, or one event of a streamed one.
type CompletionResponse struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []CompletionChoice `json:"choices"`
	Usage          *Usage             `json:"usage,omitempty"`
	PromptTokenIDs []int              `json:"prompt_token_ids,omitempty"`
}

// Model is one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen and ContextLength are the positions a request may have,
	// prompt and reply (vLLM's and OpenRouter's names; absent: no cap).
	MaxModelLen   int `json:"max_model_len,omitempty"`
	ContextLength int `json:"context_length,omitempty"`
	// Anthropic's model fields (what @anthropic-ai/sdk's models.list reads).
	Type           string `json:"type"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"`
	MaxInputTokens int    `json:"max_input_tokens,omitempty"`
	MaxTokens      int    `json:"max_tokens,omitempty"`
	// K3 is what this server can do (k3's own field).
	K3 *Capabilities `json:"k3,omitempty"`
}

// Capabilities are k3's own fields of a model card.
type Capabilities struct {
	ContextLength    int  `json:"context_length,omitempty"` // positions per request, prompt and reply (absent: no cap)
	Thinking         bool `json:"thinking"`
	Tools            bool `json:"tools"`
	StructuredOutput bool `json:"structured_output"` // response_format and required tool calls are enforced
	Drafter          bool `json:"drafter"`           // a draft model for speculative decoding is loaded
	Queue            int  `json:"queue"`             // requests that may wait while one generates
}

// ModelList is GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// NewChunk is a chat.completion.chunk with one choice: delta, and the
// finish reason on the last.
func NewChunk(id string, created int64, model string, d Delta, finish *string) ChatChunk {
	return ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []ChunkChoice{{Delta: d, FinishReason: finish}}}
}

// UsageChunk is the chunk after the last that carries only the usage
// (stream_options.include_usage).
func UsageChunk(id string, created int64, model string, u *Usage) ChatChunk {
	return ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, Choices: []ChunkChoice{}, Usage: u}
}
