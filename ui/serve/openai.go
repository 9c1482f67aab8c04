package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k3/tokenizer"
)

// The OpenAI wire format: what requests may carry and what responses say.
// Fields k3 does not implement are refused by name when they would change
// the output (n > 1, logprobs, echo), and ignored when they would not.

// apiError is an error in OpenAI's shape with its HTTP status.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    any    `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *apiError {
	var p any
	if param != "" {
		p = param
	}
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Param: p}
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}

// asAPIError maps any error to an apiError (500 unless it is one).
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, errBusy) {
		return &apiError{Status: http.StatusTooManyRequests, Message: err.Error(), Type: "rate_limit_error", Code: "server_busy"}
	}
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
}

// content is a message's content: a string, null, or an array of parts of
// which only text parts are understood.
type content struct {
	text string
	set  bool
}

// Content is a message content read as the server reads it (a string, null
// or an array of text parts, joined), for other readers of OpenAI messages
// (k3 template --messages).
type Content = content

// Text is the content's text: the parts joined, "" for null.
func (c content) Text() string { return c.text }

func (c *content) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		c.set = true
		return json.Unmarshal(data, &c.text)
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
				return fmt.Errorf("content part %d is of type %q: only text parts are supported", i, p.Type)
			}
			b.WriteString(*p.Text)
		}
		c.text, c.set = b.String(), true
		return nil
	}
	return errors.New("content must be a string, null or an array of text parts")
}

// reqMessage is one request message.
type reqMessage struct {
	Role             string               `json:"role"`
	Content          content              `json:"content"`
	ReasoningContent *string              `json:"reasoning_content"`
	Reasoning        *string              `json:"reasoning"`
	Name             string               `json:"name"`
	ToolCallID       string               `json:"tool_call_id"`
	ToolCalls        []tokenizer.ToolCall `json:"tool_calls"`
}

// streamOptions is stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// templateKwargs are chat_template_kwargs: the reference renderer's
// thinking and thinking_effort (enable_thinking is accepted as another
// name for thinking).
type templateKwargs struct {
	Thinking       *bool   `json:"thinking"`
	EnableThinking *bool   `json:"enable_thinking"`
	ThinkingEffort *string `json:"thinking_effort"`
}

// sampling are the request fields every generation endpoint shares.
type sampling struct {
	Model               string          `json:"model"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Logprobs            json.RawMessage `json:"logprobs"`
	// ReturnTokenIDs adds prompt_token_ids and the choice's token_ids to
	// the response (as vLLM does).
	ReturnTokenIDs bool `json:"return_token_ids"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages           []reqMessage      `json:"messages"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ResponseFormat     json.RawMessage   `json:"response_format"`
	ReasoningEffort    string            `json:"reasoning_effort"`
	ChatTemplateKwargs *templateKwargs   `json:"chat_template_kwargs"`
	// Thinking is Moonshot's own switch: {"type": "enabled"|"disabled"}.
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	sampling
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
}

// usage is the token count of a reply. cached_tokens are the prompt
// positions the server did not read again: reused from the state of the
// previous request.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func newUsage(prompt, completion, reused int) *usage {
	u := &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	u.PromptTokensDetails.CachedTokens = reused
	return u
}

// respToolCall is a tool call in a response (index only in stream deltas).
type respToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// respMessage is a choice's message, or a stream delta.
type respMessage struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []respToolCall `json:"tool_calls,omitempty"`
}

// messageOut is the non-streaming message: content is always present
// (null with tool calls and no text), as OpenAI writes it.
type messageOut struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []respToolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      messageOut  `json:"message"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     interface{} `json:"logprobs"`
	TokenIDs     []int       `json:"token_ids,omitempty"`
}

type chatResponse struct {
	ID             string       `json:"id"`
	Object         string       `json:"object"`
	Created        int64        `json:"created"`
	Model          string       `json:"model"`
	Choices        []chatChoice `json:"choices"`
	Usage          *usage       `json:"usage"`
	PromptTokenIDs []int        `json:"prompt_token_ids,omitempty"`
	// Warnings say what of the model's output was read loosely (k3's own field).
	Warnings []string `json:"warnings,omitempty"`
}

type chunkChoice struct {
	Index        int         `json:"index"`
	Delta        respMessage `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
	Logprobs     interface{} `json:"logprobs"`
}

type chatChunk struct {
	ID       string        `json:"id"`
	Object   string        `json:"object"`
	Created  int64         `json:"created"`
	Model    string        `json:"model"`
	Choices  []chunkChoice `json:"choices"`
	Usage    *usage        `json:"usage,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

type completionChoice struct {
	Index        int         `json:"index"`
	Text         string      `json:"text"`
	FinishReason *string     `json:"finish_reason"`
	Logprobs     interface{} `json:"logprobs"`
	TokenIDs     []int       `json:"token_ids,omitempty"`
}

type completionResponse struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []completionChoice `json:"choices"`
	Usage          *usage             `json:"usage,omitempty"`
	PromptTokenIDs []int              `json:"prompt_token_ids,omitempty"`
}

// stopStrings reads "stop": a string or an array of up to 4 strings.
func stopStrings(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "stop takes at most 4 strings, got %d", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
