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
	"bytes"
	"context"
	"encoding/base64"
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
	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// Client talks to one server.
type Client struct {
	BaseURL string // the OpenAI base URL, e.g. http://127.0.0.1:8080/v1
	APIKey  string // sent as a bearer token when set
	Model   string // the model id; "" takes the first /models lists
	HTTP    *http.Client
	// MaxReplyBytes caps a reply's text, thinking and tool calls together
	// (0: DefaultMaxReplyBytes): a server that sends more is cut off.
	MaxReplyBytes int
	// Tools, when set, are OpenAI function tools declared with every turn,
	// and ToolChoice the request's tool_choice ("required" or a named
	// function: the server, k3 serve at least, enforces the call). The
	// calls come back in Result.ToolCalls; the client runs none. A turn's
	// chat.Options.ResponseFormat is sent as response_format.
	Tools      []json.RawMessage
	ToolChoice json.RawMessage
}

// DefaultMaxReplyBytes is the reply cap when Client.MaxReplyBytes is 0.
const DefaultMaxReplyBytes = 64 << 20

// tokenSlack is how many text deltas past the max_tokens asked for a
// reply may have before it is cut: a server may flush held-back text (a
// partial stop string, what its reply parser found late) in chunks of its
// own, so deltas can outnumber tokens by a few.
const tokenSlack = 4

// capError is a reply cut off at a cap the server did not keep to.
type capError struct{ msg string }

func (e *capError) Error() string { return e.msg }

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

// ErrClosedEarly is a stream the server closed before the reply was
// complete (it stopped or restarted): what came is kept, marked stopped.
var ErrClosedEarly = errors.New("the server closed the stream before the reply was complete")

// ErrStreamBroke is a stream whose reading failed part way (the
// connection broke): what came is kept, marked stopped.
var ErrStreamBroke = errors.New("the stream from the server broke")

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
		openai.ErrorBody
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
	var list openai.ModelList
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
type Usage = openai.Usage

// Result is one finished (or stopped) turn.
type Result struct {
	Message   chat.Message // content, reasoning, Cut
	ToolCalls []xtml.ToolCall
	Finish    string // the server's finish_reason
	Usage     *Usage // when the server sent it
	Deltas    int    // text deltas received (about one per token)
	// FirstTokenSeconds is from the request to the first reply text;
	// TokensPerSecond the rate after it (usage's count when given).
	FirstTokenSeconds, TokensPerSecond float64
}

// request builds the chat request for a conversation. A leading system
// message wins over opt.System.
func (c *Client) request(history []chat.Message, opt chat.Options) *openai.ChatRequest {
	var msgs []openai.Message
	if opt.System != "" && (len(history) == 0 || history[0].Role != "system") {
		msgs = append(msgs, openai.Message{Role: "system", Content: openai.Content(opt.System)})
	}
	for _, m := range history {
		w := openai.Message{Role: m.Role, Content: openai.Content(m.Content)}
		if len(m.Images) > 0 || m.Rendered().Parts != nil {
			w.Parts = imageParts(m)
		}
		if m.Role == "assistant" && m.ReasoningContent != "" {
			r := m.ReasoningContent
			w.ReasoningContent = &r
		}
		msgs = append(msgs, w)
	}
	thinking := opt.Thinking
	kw := &openai.TemplateKwargs{Thinking: &thinking}
	if opt.Thinking && opt.Effort != "" {
		effort := opt.Effort
		kw.ThinkingEffort = &effort
	}
	req := &openai.ChatRequest{Sampling: openai.Sampling{Model: c.Model, Stream: true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true}}, Messages: msgs, ChatTemplateKwargs: kw}
	if opt.MaxTokens > 0 {
		req.MaxTokens = &opt.MaxTokens
	}
	req.ResponseFormat, req.Tools, req.ToolChoice = opt.ResponseFormat, c.Tools, c.ToolChoice
	temp := 0.0
	req.Temperature = &temp
	if !opt.IsGreedy() {
		temp = opt.Temperature
		if opt.TopP > 0 && opt.TopP < 1 {
			req.TopP = &opt.TopP
		}
		if opt.TopK > 0 {
			req.TopK = &opt.TopK
		}
		seed := int64(opt.Seed)
		req.Seed = &seed
	}
	return req
}

func phase(on func(engine.Event), text string) {
	on(engine.Event{Kind: engine.EventPhase, Text: text, At: time.Now()})
}

// readChunks reads a streamed chat completion: fn gets each chunk,
// comment each SSE comment, until [DONE] (done), the end of the stream or
// an error: fn's own, the server's error event as a *ServerError, a chunk
// that is not JSON, or the stream's (wrapped: "the stream ... broke").
func readChunks(body io.Reader, fn func(*openai.ChatChunk) error, comment func(string)) (done bool, err error) {
	var stop error // an error of the stream's content, not of its reading
	err = openai.ReadSSE(body, func(ev openai.Event) error {
		if ev.Data == nil {
			comment(ev.Comment)
			return nil
		}
		data := bytes.TrimSpace(ev.Data)
		if string(data) == "[DONE]" {
			done = true
			return errDone
		}
		var ch openai.ChatChunk
		if jerr := json.Unmarshal(data, &ch); jerr != nil {
			stop = fmt.Errorf("the server sent a chunk that is not JSON: %v", jerr)
		} else if ch.Error != nil {
			stop = &ServerError{Status: 500, Message: ch.Error.Message}
		} else {
			stop = fn(&ch)
		}
		return stop
	})
	switch {
	case err == nil, errors.Is(err, errDone):
		return done, nil
	case stop != nil:
		return done, stop
	case errors.Is(err, openai.ErrLineTooLong):
		return done, fmt.Errorf("the server sent a line longer than %d MiB; the reply is cut there", openai.MaxLine>>20)
	}
	return done, fmt.Errorf("%w: %w", ErrStreamBroke, err)
}

// contentType says what kind of body resp has, for errors.
func contentType(resp *http.Response) string {
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		return ct
	}
	return "of no stated type"
}

// errDone ends the reading of a stream at [DONE].
var errDone = errors.New("done")

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
	t := newTurnReader(c, opt, on)
	phase(on, "waiting for the server")
	resp, err := c.do(ctx, "POST", "/chat/completions", c.request(history, opt))
	if err != nil {
		if ctx.Err() != nil {
			t.res.Message.Cut = chat.CutStopped
			return t.res, nil
		}
		return nil, err
	}
	defer resp.Body.Close()
	done, readErr := readChunks(resp.Body, t.chunk, t.comment)
	if readErr == nil && ctx.Err() == nil {
		readErr = t.empty(done, resp, c.BaseURL)
	}
	return t.finish(ctx, done, readErr)
}

// turnReader reads one streamed reply: it keeps the reply's text by
// channel and its tool calls (assembled from their deltas), times the
// deltas, and holds the server to the size and token caps.
type turnReader struct {
	opt       chat.Options
	on        func(engine.Event)
	res       *Result
	maxBytes  int
	reasoning strings.Builder
	answer    strings.Builder
	calls     map[int]*xtml.ToolCall // by tool-call index
	t0        time.Time              // the request sent
	first     time.Time              // the first delta
	last      time.Time              // the latest delta
	size      int                    // bytes of reply text and calls so far
	chunks    int
}

func newTurnReader(c *Client, opt chat.Options, on func(engine.Event)) *turnReader {
	t := &turnReader{opt: opt, on: on, res: &Result{Message: chat.Message{Role: "assistant"}},
		maxBytes: c.MaxReplyBytes, calls: map[int]*xtml.ToolCall{}, t0: time.Now()}
	if t.maxBytes <= 0 {
		t.maxBytes = DefaultMaxReplyBytes
	}
	t.last = t.t0
	return t
}

// delta takes a piece of reasoning or answer text.
func (t *turnReader) delta(kind engine.EventKind, text string) {
	now := time.Now()
	if t.first.IsZero() {
		t.first = now
		t.res.FirstTokenSeconds = now.Sub(t.t0).Seconds()
	}
	switch kind {
	case engine.EventReasoning:
		t.reasoning.WriteString(text)
		phase(t.on, "thinking")
	case engine.EventAnswer:
		t.answer.WriteString(text)
		phase(t.on, "answering")
	}
	t.on(engine.Event{Kind: kind, Text: text, At: now})
	t.on(engine.Event{Kind: engine.EventToken, Step: t.res.Deltas, Seconds: now.Sub(t.last).Seconds(), At: now})
	t.res.Deltas++
	t.last = now
}

// capped counts a chunk's bytes and says whether it goes past a cap.
func (t *turnReader) capped(ch *openai.ChatChunk) error {
	text := false
	for _, choice := range ch.Choices {
		d := choice.Delta
		for _, p := range []*string{d.ReasoningContent, d.Reasoning, d.Content} {
			if p != nil {
				t.size += len(*p)
				text = text || *p != ""
			}
		}
		for _, td := range d.ToolCalls {
			t.size += len(td.ID) + len(td.Function.Name) + len(td.Function.Arguments)
		}
	}
	switch {
	case t.size > t.maxBytes:
		return &capError{fmt.Sprintf("the server sent more than %d MB of reply; it is cut there", t.maxBytes>>20)}
	case text && t.opt.MaxTokens > 0 && t.res.Deltas >= t.opt.MaxTokens+tokenSlack:
		return &capError{fmt.Sprintf("the server sent more than the %d tokens asked for; the reply is cut there", t.opt.MaxTokens)}
	}
	return nil
}

// chunk takes one chunk of the stream.
func (t *turnReader) chunk(ch *openai.ChatChunk) error {
	t.chunks++
	if err := t.capped(ch); err != nil {
		return err
	}
	if ch.Usage != nil {
		t.res.Usage = ch.Usage
	}
	for _, choice := range ch.Choices {
		d := choice.Delta
		if r := d.ReasoningContent; r != nil && *r != "" {
			t.delta(engine.EventReasoning, *r)
		} else if r := d.Reasoning; r != nil && *r != "" {
			t.delta(engine.EventReasoning, *r)
		}
		if d.Content != nil && *d.Content != "" {
			t.delta(engine.EventAnswer, *d.Content)
		}
		for k, td := range d.ToolCalls {
			t.toolDelta(k, td)
		}
		if choice.FinishReason != nil {
			t.res.Finish = *choice.FinishReason
		}
	}
	return nil
}

// toolDelta adds the k-th tool-call delta of a chunk to its call.
func (t *turnReader) toolDelta(k int, td openai.ToolCall) {
	i := k
	if td.Index != nil {
		i = *td.Index
	}
	tc := t.calls[i]
	if tc == nil {
		tc = &xtml.ToolCall{Type: "function"}
		t.calls[i] = tc
	}
	if td.ID != "" {
		tc.ID = td.ID
	}
	tc.Function.Name += td.Function.Name
	tc.Function.Arguments += td.Function.Arguments
	phase(t.on, "calling a tool")
}

// comment takes an SSE comment: k3 serve says how far it read the prompt.
func (t *turnReader) comment(c string) {
	if strings.HasPrefix(c, "prefill ") {
		phase(t.on, "the server is reading the prompt "+strings.TrimPrefix(c, "prefill "))
	}
}

// empty is the error for a stream that read cleanly but held nothing.
func (t *turnReader) empty(done bool, resp *http.Response, baseURL string) error {
	switch {
	case t.chunks == 0:
		return fmt.Errorf("the server's reply held no events (no \"data: {...}\" lines; it was %s): is %s an OpenAI-compatible server?",
			contentType(resp), baseURL)
	case done && t.res.Deltas == 0 && len(t.calls) == 0 && t.res.Finish == "":
		return errors.New("the server ended the stream with no reply text, no tool call and no finish reason")
	}
	return nil
}

// finish ends the reply: the tool calls in index order (shown as text),
// the speed, and the verdict on how the stream ended (done: at [DONE]).
func (t *turnReader) finish(ctx context.Context, done bool, readErr error) (*Result, error) {
	res := t.res
	idx := make([]int, 0, len(t.calls))
	for i := range t.calls {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		tc := *t.calls[i]
		res.ToolCalls = append(res.ToolCalls, tc)
		text := ToolCallText(tc)
		t.answer.WriteString(text)
		t.on(engine.Event{Kind: engine.EventTool, Text: text, At: time.Now()})
		t.on(engine.Event{Kind: engine.EventAnswer, Text: text, At: time.Now()})
	}
	res.Message.Content, res.Message.ReasoningContent = t.answer.String(), t.reasoning.String()
	if !t.first.IsZero() {
		n := float64(res.Deltas)
		if res.Usage != nil && res.Usage.CompletionTokens > 0 {
			n = float64(res.Usage.CompletionTokens)
		}
		if dt := t.last.Sub(t.first).Seconds(); dt > 0 && n > 1 {
			res.TokensPerSecond = (n - 1) / dt
		}
	}
	switch {
	case ctx.Err() != nil:
		res.Message.Cut = chat.CutStopped
		return res, nil
	case readErr != nil:
		res.Message.Cut = chat.CutStopped
		var ce *capError
		if errors.As(readErr, &ce) {
			res.Message.Cut = chat.CutTurnCap
		}
		return res, readErr
	case res.Finish == "length":
		res.Message.Cut = chat.CutTurnCap
	case !done && res.Finish == "":
		res.Message.Cut = chat.CutStopped
		return res, ErrClosedEarly
	}
	return res, nil
}

// ToolCallText is how a tool call shows in the chat (the app runs no
// tools; it shows what the model asked for).
func ToolCallText(tc xtml.ToolCall) string {
	return fmt.Sprintf("\n\n[tool call: %s %s]", tc.Function.Name, tc.Function.Arguments)
}

// imageParts sends a user message's pictures before its text, as data:
// URLs in image_url parts (what vLLM and SGLang take), and the text as
// the parts the history keeps (Message.Parts; one when it has none).
func imageParts(m chat.Message) []openai.ContentPart {
	var ps []openai.ContentPart
	for _, img := range m.Images {
		url := "data:" + http.DetectContentType(img) + ";base64," + base64.StdEncoding.EncodeToString(img)
		ps = append(ps, openai.ContentPart{Image: true, ImageURL: url})
	}
	if m.Rendered().Parts == nil {
		return append(ps, openai.ContentPart{Text: m.Content})
	}
	for _, p := range m.Parts { // each text part its own, as the history keeps them
		ps = append(ps, openai.ContentPart{Text: p})
	}
	return ps
}
