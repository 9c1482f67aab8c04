// Package remote runs chat turns on an OpenAI-compatible server instead of
// the engine on this machine: another `k3 serve`, or vLLM or SGLang
// serving moonshotai/Kimi-K3 with the kimi_k3 tool-call and reasoning
// parsers. Turns are streamed (server-sent events); the reply's thinking is
// read from reasoning_content or reasoning (vLLM's newer name), tool calls
// from their deltas. Events are the engine's, so the app's chat view and
// gauges take them as they take the local engine's. No Fyne here: the app
// wraps a Client as its chat engine.
package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
)

// Client talks to one server.
type Client struct {
	BaseURL string // the OpenAI base URL, e.g. http://127.0.0.1:8080/v1
	APIKey  string // sent as a bearer token when set
	Model   string // the model id; "" takes the first /models lists
	HTTP    *http.Client
}

// New returns a client; the base URL may be given without /v1.
func New(baseURL, apiKey, model string) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not a server address: write it as http://HOST:PORT/v1", baseURL)
	}
	p := strings.TrimRight(u.Path, "/")
	if !strings.HasSuffix(p, "/v1") {
		p += "/v1"
	}
	u.Path = p
	return &Client{BaseURL: u.String(), APIKey: strings.TrimSpace(apiKey), Model: strings.TrimSpace(model), HTTP: &http.Client{}}, nil
}

// ServerError is an error response from the server.
type ServerError struct {
	Status  int
	Message string
}

func (e *ServerError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("the server refused the API key (%d): %s", e.Status, e.Message)
	case http.StatusNotFound:
		return fmt.Sprintf("the server does not know that model or address (404): %s", e.Message)
	case http.StatusTooManyRequests:
		return fmt.Sprintf("the server is busy (429): %s", e.Message)
	}
	return fmt.Sprintf("the server answered %d: %s", e.Status, e.Message)
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("could not reach the server at %s: %w", c.BaseURL, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return nil, errorOf(resp.StatusCode, data)
	}
	return resp, nil
}

// errorOf reads OpenAI's {"error": {"message"}} (or FastAPI's {"detail"}).
func errorOf(status int, data []byte) error {
	var e struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	msg := strings.TrimSpace(string(data))
	if json.Unmarshal(data, &e) == nil {
		switch {
		case e.Error != nil && e.Error.Message != "":
			msg = e.Error.Message
		case e.Message != "":
			msg = e.Message
		case e.Detail != nil:
			msg = fmt.Sprint(e.Detail)
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &ServerError{Status: status, Message: msg}
}

// Models lists the model ids the server serves.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	resp, err := c.do(ctx, "GET", "/models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("the server's model list is not OpenAI's: %v", err)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// Resolve picks the model: the one asked for, which must be listed, or the
// first listed.
func (c *Client) Resolve(ctx context.Context) (string, error) {
	ids, err := c.Models(ctx)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", errors.New("the server lists no models")
	}
	if c.Model == "" {
		c.Model = ids[0]
		return c.Model, nil
	}
	for _, id := range ids {
		if id == c.Model {
			return id, nil
		}
	}
	return "", fmt.Errorf("the server does not serve %q; it serves %s", c.Model, strings.Join(ids, ", "))
}

// Usage is the server's token count of a reply.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	Details          *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// Result is one finished (or stopped) turn.
type Result struct {
	Message   chat.Message // content, reasoning, Cut
	ToolCalls []tokenizer.ToolCall
	Finish    string // the server's finish_reason
	Usage     *Usage // when the server sent it
	Deltas    int    // text deltas received (about one per token)
	// FirstTokenSeconds is from the request to the first reply text;
	// TokensPerSecond the rate after it (usage's count when given).
	FirstTokenSeconds, TokensPerSecond float64
}

type wireMessage struct {
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent *string `json:"reasoning_content,omitempty"`
}

// request builds the chat request for a conversation. A leading system
// message wins over opt.System.
func (c *Client) request(history []chat.Message, opt chat.Options) map[string]any {
	var msgs []wireMessage
	if opt.System != "" && (len(history) == 0 || history[0].Role != "system") {
		msgs = append(msgs, wireMessage{Role: "system", Content: opt.System})
	}
	for _, m := range history {
		w := wireMessage{Role: m.Role, Content: m.Content}
		if m.Role == "assistant" && m.ReasoningContent != "" {
			r := m.ReasoningContent
			w.ReasoningContent = &r
		}
		msgs = append(msgs, w)
	}
	kw := map[string]any{"thinking": !opt.NoThink}
	if !opt.NoThink && opt.Effort != "" {
		kw["thinking_effort"] = opt.Effort
	}
	req := map[string]any{"model": c.Model, "messages": msgs, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "chat_template_kwargs": kw}
	if opt.MaxTokens > 0 {
		req["max_tokens"] = opt.MaxTokens
	}
	if opt.IsGreedy() {
		req["temperature"] = 0
	} else {
		req["temperature"] = opt.Temperature
		if opt.TopP > 0 && opt.TopP < 1 {
			req["top_p"] = opt.TopP
		}
		if opt.TopK > 0 {
			req["top_k"] = opt.TopK
		}
		req["seed"] = opt.Seed
	}
	return req
}

type toolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type streamChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string     `json:"content"`
			ReasoningContent *string     `json:"reasoning_content"`
			Reasoning        *string     `json:"reasoning"`
			ToolCalls        []toolDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func phase(on func(engine.Event), text string) {
	on(engine.Event{Kind: engine.EventPhase, Text: text, At: time.Now()})
}

// Turn streams one reply to the conversation (the last message is the
// user's). on gets phases, the reply's text by channel (EventReasoning,
// EventAnswer), tool calls as EventTool text and one EventToken per text
// delta, timed from the previous one, so the app's speed gauges work.
// Cancelling ctx closes the stream: the partial reply comes back marked
// stopped, with no error.
func (c *Client) Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (*Result, error) {
	if on == nil {
		on = func(engine.Event) {}
	}
	if c.Model == "" {
		if _, err := c.Resolve(ctx); err != nil {
			return nil, err
		}
	}
	res := &Result{Message: chat.Message{Role: "assistant"}}
	t0 := time.Now()
	phase(on, "waiting for the server")
	resp, err := c.do(ctx, "POST", "/chat/completions", c.request(history, opt))
	if err != nil {
		if ctx.Err() != nil {
			res.Message.Cut = chat.CutStopped
			return res, nil
		}
		return nil, err
	}
	defer resp.Body.Close()
	var reasoning, answer strings.Builder
	calls := map[int]*tokenizer.ToolCall{}
	last, first := t0, time.Time{}
	delta := func(kind engine.EventKind, text string) {
		now := time.Now()
		if first.IsZero() {
			first = now
			res.FirstTokenSeconds = now.Sub(t0).Seconds()
		}
		switch kind {
		case engine.EventReasoning:
			reasoning.WriteString(text)
			phase(on, "thinking")
		case engine.EventAnswer:
			answer.WriteString(text)
			phase(on, "answering")
		}
		on(engine.Event{Kind: kind, Text: text, At: now})
		on(engine.Event{Kind: engine.EventToken, Step: res.Deltas, Seconds: now.Sub(last).Seconds(), At: now})
		res.Deltas++
		last = now
	}
	rd := bufio.NewReader(resp.Body)
	var readErr error
	done := false
	for !done {
		line, err := rd.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, ":"):
			// a comment: k3 serve says how far it read the prompt
			if c := strings.TrimSpace(line[1:]); strings.HasPrefix(c, "prefill ") {
				phase(on, "the server is reading the prompt "+strings.TrimPrefix(c, "prefill "))
			}
		case strings.HasPrefix(line, "data:"):
			data := strings.TrimSpace(line[len("data:"):])
			if data == "[DONE]" {
				done = true
				break
			}
			var ch streamChunk
			if jerr := json.Unmarshal([]byte(data), &ch); jerr != nil {
				readErr = fmt.Errorf("the server sent a chunk that is not JSON: %v", jerr)
				done = true
				break
			}
			if ch.Error != nil {
				readErr = &ServerError{Status: 500, Message: ch.Error.Message}
				done = true
				break
			}
			if ch.Usage != nil {
				res.Usage = ch.Usage
			}
			for _, choice := range ch.Choices {
				d := choice.Delta
				if r := d.ReasoningContent; r != nil && *r != "" {
					delta(engine.EventReasoning, *r)
				} else if r := d.Reasoning; r != nil && *r != "" {
					delta(engine.EventReasoning, *r)
				}
				if d.Content != nil && *d.Content != "" {
					delta(engine.EventAnswer, *d.Content)
				}
				for k, td := range d.ToolCalls {
					i := k
					if td.Index != nil {
						i = *td.Index
					}
					tc := calls[i]
					if tc == nil {
						tc = &tokenizer.ToolCall{Type: "function"}
						calls[i] = tc
					}
					if td.ID != "" {
						tc.ID = td.ID
					}
					tc.Function.Name += td.Function.Name
					tc.Function.Arguments += td.Function.Arguments
					phase(on, "calling a tool")
				}
				if choice.FinishReason != nil {
					res.Finish = *choice.FinishReason
				}
			}
		}
		if err != nil {
			if !done && ctx.Err() == nil && err != io.EOF {
				readErr = fmt.Errorf("the stream from the server broke: %w", err)
			}
			break
		}
	}
	idx := make([]int, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		tc := *calls[i]
		res.ToolCalls = append(res.ToolCalls, tc)
		text := ToolCallText(tc)
		answer.WriteString(text)
		on(engine.Event{Kind: engine.EventTool, Text: text, At: time.Now()})
		on(engine.Event{Kind: engine.EventAnswer, Text: text, At: time.Now()})
	}
	res.Message.Content, res.Message.ReasoningContent = answer.String(), reasoning.String()
	if !first.IsZero() {
		n := float64(res.Deltas)
		if res.Usage != nil && res.Usage.CompletionTokens > 0 {
			n = float64(res.Usage.CompletionTokens)
		}
		if dt := last.Sub(first).Seconds(); dt > 0 && n > 1 {
			res.TokensPerSecond = (n - 1) / dt
		}
	}
	switch {
	case ctx.Err() != nil:
		res.Message.Cut = chat.CutStopped
		return res, nil
	case readErr != nil:
		res.Message.Cut = chat.CutStopped
		return res, readErr
	case res.Finish == "length":
		res.Message.Cut = chat.CutTurnCap
	case !done && res.Finish == "":
		res.Message.Cut = chat.CutStopped
		return res, errors.New("the server closed the stream before the reply was complete")
	}
	return res, nil
}

// ToolCallText is how a tool call shows in the chat (the app runs no
// tools; it shows what the model asked for).
func ToolCallText(tc tokenizer.ToolCall) string {
	return fmt.Sprintf("\n\n[tool call: %s %s]", tc.Function.Name, tc.Function.Arguments)
}
