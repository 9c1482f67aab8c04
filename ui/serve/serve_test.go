package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/tokenizer"
)

var (
	demoOnce sync.Once
	demoDir  string
	demoErr  error
)

// demo opens the small synthetic model with a byte-level tokenizer (the
// checkpoint is written once per test binary).
func demo(t testing.TB) (*engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	demoOnce.Do(func() {
		demoDir = filepath.Join(tempRoot, "m")
		demoErr = demomodel.Write(demoDir)
	})
	require.NoError(t, demoErr)
	return demomodel.Open(t, demoDir, 2)
}

var tempRoot string

func TestMain(m *testing.M) {
	var code int
	func() {
		dir, err := os.MkdirTemp("", "k3-serve-test")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		tempRoot = dir
		code = m.Run()
	}()
	os.Exit(code)
}

// start serves a new server on a loopback port.
func start(t *testing.T, mod func(*Options)) (*Server, *engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	return startWith(t, mod, nil)
}

// startWith is start with the server's generator replaced before it
// serves (gen gets the tokenizer), so no request can see the old one.
func startWith(t *testing.T, mod func(*Options), gen func(*tokenizer.Tokenizer) generator) (*Server, *engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	e, tok := demo(t)
	o := Options{Engine: e, Tok: tok, ModelID: "k3-demo", DefaultMaxTokens: 8, KeepAlive: time.Hour}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	if gen != nil {
		s.sess = gen(tok)
	}
	require.NoError(t, s.Start("127.0.0.1:0"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s, e, tok
}

func post(t *testing.T, s *Server, path string, body any, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest("POST", "http://"+s.Addr()+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	return send(t, req, hdr)
}

func get(t *testing.T, s *Server, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+s.Addr()+path, nil)
	require.NoError(t, err)
	return send(t, req, hdr)
}

// send sends req with the headers hdr (name, value, ...) and reads the
// whole answer.
func send(t *testing.T, req *http.Request, hdr []string) (*http.Response, []byte) {
	t.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, data
}

type chatResp struct {
	Choices []struct {
		Message struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		TokenIDs     []int  `json:"token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	PromptTokenIDs []int    `json:"prompt_token_ids"`
	Warnings       []string `json:"warnings"`
}

func decodeChat(t *testing.T, data []byte) chatResp {
	t.Helper()
	var r chatResp
	require.NoError(t, json.Unmarshal(data, &r), string(data))
	require.Len(t, r.Choices, 1, string(data))
	return r
}

func TestHealthAndModels(t *testing.T) {
	s, _, _ := start(t, nil)
	resp, data := get(t, s, "/health")
	assert.Equal(t, 200, resp.StatusCode)
	assert.JSONEq(t, `{"status":"ok","model":"k3-demo","generating":false,"queued":0}`, string(data))
	resp, data = get(t, s, "/v1/models")
	assert.Equal(t, 200, resp.StatusCode)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(data, &list))
	assert.Equal(t, "list", list.Object)
	require.Len(t, list.Data, 1)
	assert.Equal(t, "k3-demo", list.Data[0].ID)
	resp, _ = get(t, s, "/v1/models/k3-demo")
	assert.Equal(t, 200, resp.StatusCode)
	resp, data = get(t, s, "/v1/models/gpt-4")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Contains(t, string(data), `"code":"model_not_found"`)
}

// coerce is s as it comes out of JSON: invalid UTF-8 (the random demo
// model writes plenty) becomes U+FFFD.
func coerce(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// TestServedReplyEqualsChat: the served greedy reply to a conversation is
// k3 chat's (a chat.Session with the same options), token for token, and
// the second request reuses the state the first left.
func TestServedReplyEqualsChat(t *testing.T) {
	s, e, tok := start(t, nil)
	opt := chat.Options{Thinking: true, MaxTokens: 8, Sampling: engine.Sampling{Greedy: true}}
	sess := chat.NewSession(e, tok)
	r1, err := sess.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)

	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 8, "return_token_ids": true,
		"messages": []map[string]any{{"role": "user", "content": "Hello there"}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	a := decodeChat(t, data)
	assert.Equal(t, r1.IDs, a.Choices[0].TokenIDs)
	assert.Equal(t, coerce(r1.Reasoning), a.Choices[0].Message.ReasoningContent)
	assert.Equal(t, "length", a.Choices[0].FinishReason)
	assert.Equal(t, 0, a.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, len(a.PromptTokenIDs), a.Usage.PromptTokens)
	assert.Equal(t, 8, a.Usage.CompletionTokens)

	// the client sends the reply back as it got it; k3 chat continues the
	// same conversation
	reasoning := a.Choices[0].Message.ReasoningContent
	answer := ""
	if c := a.Choices[0].Message.Content; c != nil {
		answer = *c
	}
	sess2 := chat.NewSession(e, tok)
	sess2.SetHistory([]chat.Message{{Role: "user", Content: "Hello there"}, {Role: "assistant", Content: answer, ReasoningContent: reasoning}})
	r2, err := sess2.Turn(context.Background(), "And again?", opt, nil)
	require.NoError(t, err)
	resp, data = post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 8, "return_token_ids": true,
		"messages": []map[string]any{
			{"role": "user", "content": "Hello there"},
			// content as an array of text parts, reasoning under vLLM's newer name
			{"role": "assistant", "content": []map[string]string{{"type": "text", "text": answer}}, "reasoning": reasoning},
			{"role": "user", "content": "And again?"}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	b := decodeChat(t, data)
	assert.Equal(t, r2.IDs, b.Choices[0].TokenIDs)
	assert.Equal(t, coerce(r2.Reasoning), b.Choices[0].Message.ReasoningContent)
	reused := b.Usage.PromptTokensDetails.CachedTokens
	assert.GreaterOrEqual(t, reused, len(a.PromptTokenIDs)-1, "the second request reads only what the first did not")
	assert.Equal(t, strconv.Itoa(reused), resp.Header.Get("X-K3-Reused-Positions"))
	t.Logf("second request: %d of %d prompt positions reused", reused, b.Usage.PromptTokens)
	assert.Equal(t, int64(reused), s.Stats().Reused)
}

// sseEvent is one line group of a stream: data or a comment.
type sseEvent struct {
	comment string
	data    string
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, ":"):
			out = append(out, sseEvent{comment: strings.TrimSpace(line[1:])})
		case strings.HasPrefix(line, "data: "):
			out = append(out, sseEvent{data: line[len("data: "):]})
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

func streamPost(t *testing.T, s *Server, body any) (*http.Response, []sseEvent) {
	t.Helper()
	js, _ := json.Marshal(body)
	resp, err := http.Post("http://"+s.Addr()+"/v1/chat/completions", "application/json", bytes.NewReader(js))
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp, readSSE(t, resp.Body)
}

type chunkJSON struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role             *string `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// warnedChunk is a chat stream chunk with its warnings.
type warnedChunk struct {
	chunkJSON
	Warnings []string `json:"warnings"`
}

// chatChunks requires a chat stream to end with [DONE] and decodes its
// data events before it.
func chatChunks(t *testing.T, evs []sseEvent) []warnedChunk {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, "[DONE]", evs[len(evs)-1].data, "the stream ends with [DONE]")
	var out []warnedChunk
	for _, ev := range evs[:len(evs)-1] {
		if ev.data == "" {
			continue
		}
		var c warnedChunk
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
		out = append(out, c)
	}
	return out
}

// content is the text the chunk's choices add to the answer.
func (c chunkJSON) content() string {
	var s string
	for _, ch := range c.Choices {
		if ch.Delta.Content != nil {
			s += *ch.Delta.Content
		}
	}
	return s
}

// TestStreamSSE checks what the openai client does not: headers, the
// prefill keep-alive comments (the first before anything is read), the chunk order (role, deltas, finish,
// usage) and the closing [DONE]; and that the streamed text is the
// non-streamed reply.
func TestStreamSSE(t *testing.T) {
	s, _, _ := start(t, nil)
	long := strings.Repeat("a longer prompt that takes several chunks to read. ", 4)
	req := map[string]any{"model": "k3-demo", "max_tokens": 8, "messages": []map[string]any{{"role": "user", "content": long}},
		"chat_template_kwargs": map[string]any{"thinking": false}, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	resp, evs := streamPost(t, s, req)
	// the same request again, not streamed (it reuses the state: same reply)
	delete(req, "stream")
	delete(req, "stream_options")
	_, data := post(t, s, "/v1/chat/completions", req)
	want := decodeChat(t, data)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1].data, "the stream ends with [DONE]")
	var prefill int
	var firstPrefill string
	var chunks []chunkJSON
	for _, ev := range evs[:len(evs)-1] {
		if ev.comment != "" {
			if strings.HasPrefix(ev.comment, "prefill ") {
				if prefill == 0 {
					firstPrefill = ev.comment
				}
				prefill++
				assert.Len(t, chunks, 1, "prefill comments come after the role and before any text")
			}
			continue
		}
		var c chunkJSON
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
		assert.Equal(t, "chat.completion.chunk", c.Object)
		chunks = append(chunks, c)
	}
	assert.GreaterOrEqual(t, prefill, 2, "one keep-alive comment per prompt chunk")
	assert.Regexp(t, `^prefill 0/\d+$`, firstPrefill, "the first comment is sent before the prompt's first pass")
	require.GreaterOrEqual(t, len(chunks), 3)
	first := chunks[0].Choices[0]
	require.NotNil(t, first.Delta.Role)
	assert.Equal(t, "assistant", *first.Delta.Role)
	var text strings.Builder
	finishAt := -1
	for i, c := range chunks[1:] {
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		assert.Nil(t, ch.Delta.Role, "the role comes once, first")
		if ch.Delta.Content != nil {
			assert.Equal(t, -1, finishAt, "no text after the finish reason")
			text.WriteString(*ch.Delta.Content)
		}
		if ch.FinishReason != nil {
			finishAt = i + 1
			assert.Equal(t, want.Choices[0].FinishReason, *ch.FinishReason)
		}
	}
	assert.Equal(t, len(chunks)-2, finishAt, "the finish reason is on the chunk before the usage chunk")
	u := chunks[len(chunks)-1]
	assert.Empty(t, u.Choices)
	require.NotNil(t, u.Usage)
	assert.Equal(t, want.Usage.PromptTokens, u.Usage.PromptTokens)
	assert.Equal(t, 8, u.Usage.CompletionTokens)
	require.NotNil(t, want.Choices[0].Message.Content)
	assert.Equal(t, *want.Choices[0].Message.Content, text.String())
}

func TestErrors(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.MaxBodyBytes = 4096; o.MaxContext = 200 })
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	for _, c := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"not json", "{", 400, "not valid JSON"},
		{"no messages", map[string]any{"messages": []any{}}, 400, "messages must not be empty"},
		{"bad role", map[string]any{"messages": []map[string]any{{"role": "robot", "content": "x"}}}, 400, "unknown role"},
		{"image part", map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image_url"}}}}}, 400, "image_url.url"},
		{"model", map[string]any{"model": "gpt-4o", "messages": msgs}, 404, "model_not_found"},
		{"n", map[string]any{"n": 2, "messages": msgs}, 400, `"param":"n"`},
		{"temperature", map[string]any{"temperature": -1, "messages": msgs}, 400, "temperature"},
		{"max_tokens", map[string]any{"max_tokens": 0, "messages": msgs}, 400, "max_tokens must be at least 1"},
		{"effort", map[string]any{"reasoning_effort": "huge", "messages": msgs}, 400, "reasoning_effort"},
		{"template effort", map[string]any{"chat_template_kwargs": map[string]any{"thinking_effort": "medium"}, "messages": msgs}, 400, "thinking effort"},
		{"tool choice", map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}, "messages": msgs}, 400, "not among the tools"},
		{"stop", map[string]any{"stop": []string{"a", "b", "c", "d", "e"}, "messages": msgs}, 400, "at most 4"},
		{"context", map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", 300)}}}, 400, "context_length_exceeded"},
		{"body", map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("y", 5000)}}}, 413, "larger than 4096 bytes"},
	} {
		resp, data := post(t, s, "/v1/chat/completions", c.body)
		assert.Equal(t, c.status, resp.StatusCode, c.name)
		assert.Contains(t, string(data), c.want, c.name)
		var e struct {
			Error struct {
				Message, Type string
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(data, &e), c.name)
		assert.NotEmpty(t, e.Error.Message, c.name)
		assert.NotEmpty(t, e.Error.Type, c.name)
	}
	resp, data := get(t, s, "/v1/chat/completions")
	assert.Equal(t, 405, resp.StatusCode)
	assert.Contains(t, string(data), `"error"`)
	resp, _ = get(t, s, "/v1/nothing")
	assert.Equal(t, 404, resp.StatusCode)
	assert.Equal(t, int64(0), s.Stats().Generations)
}

func TestAPIKey(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.APIKey = "sekret" })
	resp, data := get(t, s, "/v1/models")
	assert.Equal(t, 401, resp.StatusCode)
	assert.Contains(t, string(data), "invalid_api_key")
	resp, data = get(t, s, "/v1/models", "Authorization", "Bearer wrong")
	assert.Equal(t, 401, resp.StatusCode)
	assert.NotContains(t, string(data), "sekret")
	resp, _ = get(t, s, "/v1/models", "Authorization", "Bearer sekret")
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = get(t, s, "/v1/models", "x-api-key", "sekret")
	assert.Equal(t, 200, resp.StatusCode)
	resp, _ = get(t, s, "/health")
	assert.Equal(t, 200, resp.StatusCode, "health needs no key")
}

func TestCheckAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1:8080", "localhost:1", "[::1]:80", "127.8.9.1:0"} {
		assert.NoError(t, CheckAddr(a, ""), a)
	}
	for _, a := range []string{"0.0.0.0:8080", ":8080", "192.168.1.2:80", "[::]:80", "example.com:80"} {
		assert.Error(t, CheckAddr(a, ""), a)
		assert.NoError(t, CheckAddr(a, "k"), a)
	}
	assert.Error(t, CheckAddr("nonsense", "k"))
	e, tok := demo(t)
	s, err := New(Options{Engine: e, Tok: tok, ModelID: "x"})
	require.NoError(t, err)
	assert.ErrorContains(t, s.Start("0.0.0.0:0"), "--api-key")
}

func TestCORS(t *testing.T) {
	s, _, _ := start(t, nil)
	resp, _ := get(t, s, "/v1/models", "Origin", "http://evil.example")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "CORS is off unless asked for")
	s2, _, _ := start(t, func(o *Options) { o.CORSOrigins = []string{"http://app.example"} })
	resp, _ = get(t, s2, "/v1/models", "Origin", "http://app.example")
	assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	resp, _ = get(t, s2, "/v1/models", "Origin", "http://evil.example")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	req, _ := http.NewRequest("OPTIONS", "http://"+s2.Addr()+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "http://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	pre, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	pre.Body.Close()
	assert.Equal(t, 204, pre.StatusCode)
}

// TestStopStrings: generation ends where a stop string appears and the
// string is not returned.
func TestStopStrings(t *testing.T) {
	s, _, _ := start(t, nil)
	req := map[string]any{"max_tokens": 24, "messages": []map[string]any{{"role": "user", "content": "Hi"}}, "reasoning_effort": "none"}
	_, data := post(t, s, "/v1/chat/completions", req)
	full := *decodeChat(t, data).Choices[0].Message.Content
	// an ASCII letter or digit past the start (bytes the JSON keeps as they are)
	at := strings.IndexFunc(full[1:], func(r rune) bool {
		return r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	require.GreaterOrEqual(t, at, 0, full)
	stop := full[1+at : 2+at]
	req["stop"] = []string{stop, "never appears"}
	_, data = post(t, s, "/v1/chat/completions", req)
	r := decodeChat(t, data)
	assert.Equal(t, "stop", r.Choices[0].FinishReason)
	assert.Equal(t, full[:strings.Index(full, stop)], *r.Choices[0].Message.Content)
	// streamed: the same text, the stop string held back
	req["stream"] = true
	_, evs := streamPost(t, s, req)
	var text strings.Builder
	for _, c := range chatChunks(t, evs) {
		text.WriteString(c.content())
	}
	assert.Equal(t, *r.Choices[0].Message.Content, text.String())
}

// TestSampledReproducible: a seed replays the same sampled reply.
func TestSampledReproducible(t *testing.T) {
	s, _, _ := start(t, nil)
	req := map[string]any{"max_tokens": 8, "temperature": 0.9, "top_p": 0.95, "top_k": 40, "seed": 7,
		"messages": []map[string]any{{"role": "user", "content": "Hi"}}, "return_token_ids": true}
	_, a := post(t, s, "/v1/chat/completions", req)
	_, b := post(t, s, "/v1/chat/completions", req)
	delete(req, "temperature")
	_, g := post(t, s, "/v1/chat/completions", req)
	ra, rb, rg := decodeChat(t, a), decodeChat(t, b), decodeChat(t, g)
	assert.Equal(t, ra.Choices[0].TokenIDs, rb.Choices[0].TokenIDs)
	assert.NotEqual(t, ra.Choices[0].TokenIDs, rg.Choices[0].TokenIDs, "temperature 0.9 gave the greedy reply")
}

func TestCompletions(t *testing.T) {
	s, e, tok := start(t, nil)
	prompt := "<|open|>message role=\"user\"<|sep|>Hi"
	resp, data := post(t, s, "/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 6, "return_token_ids": true})
	require.Equal(t, 200, resp.StatusCode, string(data))
	var r struct {
		Object  string `json:"object"`
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
			TokenIDs     []int  `json:"token_ids"`
		} `json:"choices"`
		PromptTokenIDs []int `json:"prompt_token_ids"`
	}
	require.NoError(t, json.Unmarshal(data, &r))
	assert.Equal(t, "text_completion", r.Object)
	assert.Equal(t, tok.EncodeSpecial(prompt), r.PromptTokenIDs, "control-token strings in a raw prompt are control tokens")
	res, err := e.Generate(context.Background(), nil, r.PromptTokenIDs, engine.GenOptions{MaxTokens: 6, StopIDs: tok.StopIDs()})
	require.NoError(t, err)
	assert.Equal(t, res.Generated, r.Choices[0].TokenIDs)
	assert.Equal(t, coerce(string(tok.Decode(res.Generated))), r.Choices[0].Text)

	js, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 6, "stream": true})
	sresp, err := http.Post("http://"+s.Addr()+"/v1/completions", "application/json", bytes.NewReader(js))
	require.NoError(t, err)
	evs := readSSE(t, sresp.Body)
	sresp.Body.Close()
	var text strings.Builder
	for _, ev := range evs {
		if ev.data == "" || ev.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c))
		text.WriteString(c.Choices[0].Text)
	}
	assert.Equal(t, r.Choices[0].Text, text.String())
	assert.Equal(t, "[DONE]", evs[len(evs)-1].data)
}

// TestDisconnectCancels: a streaming client that goes away stops its
// generation, and the next request is served.
func TestDisconnectCancels(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.Queue = -1 })
	js, _ := json.Marshal(map[string]any{"max_tokens": 100000, "stream": true, "messages": []map[string]any{{"role": "user", "content": "go on"}},
		"chat_template_kwargs": map[string]any{"thinking": false}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.Addr()+"/v1/chat/completions", bytes.NewReader(js))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	rd := bufio.NewReader(resp.Body)
	deltas := 0
	for deltas < 3 {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, `"content"`) {
			deltas++
		}
	}
	// a second request while the first generates: no queue place
	r2, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x"}}})
	assert.Equal(t, 429, r2.StatusCode)
	assert.Contains(t, string(data), "busy")
	cancel()
	resp.Body.Close()
	require.Eventually(t, func() bool { return s.Stats().Cancelled == 1 }, 30*time.Second, 10*time.Millisecond)
	r3, data := post(t, s, "/v1/chat/completions", map[string]any{"max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": "x"}}})
	assert.Equal(t, 200, r3.StatusCode, string(data))
}
