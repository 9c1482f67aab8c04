package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/internal/fixture"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `k3 serve` in-process on a loopback port and returns its
// base URL; the returned function stops it (as Ctrl-C does) and returns
// the exit code and output.
func startServe(t *testing.T, args ...string) (string, func() (int, string, string)) {
	t.Helper()
	sig := make(chan chan<- os.Signal, 1)
	old := serveSignals
	serveSignals = func(c chan<- os.Signal) { sig <- c }
	t.Cleanup(func() { serveSignals = old })
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"serve"}, args...), &stdout, &stderr) }()
	re := regexp.MustCompile(`at (http://\S+/v1)`)
	var url string
	require.Eventually(t, func() bool {
		select {
		case code := <-done:
			t.Fatalf("k3 serve exited %d\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			return true
		}
		return false
	}, 60*time.Second, 20*time.Millisecond)
	c := <-sig
	stop := func() (int, string, string) {
		c <- os.Interrupt
		select {
		case code := <-done:
			return code, stdout.String(), stderr.String()
		case <-time.After(60 * time.Second):
			t.Fatal("k3 serve did not stop")
		}
		return -1, "", ""
	}
	return url, stop
}

// coerce is s as it comes out of JSON (invalid UTF-8, which the random
// demo model writes, becomes U+FFFD).
func coerce(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

type conformance struct {
	Models []string `json:"models"`
	Chat   struct {
		Object, Content, Finish string
		Reasoning               *string
		Usage                   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		}
	} `json:"chat"`
	Stream struct {
		Chunks             int
		Roles              []string
		Content, Reasoning string
		Finish             []string
		Usage              *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	} `json:"stream"`
	Logprobs struct {
		Streamed, Plain               [][]any
		StreamedContent, PlainContent string
	}
	Turn2 struct {
		Content      string
		Reasoning    *string
		ReusedHeader string
		Usage        struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	} `json:"turn2"`
	Tools struct {
		PromptTokenIDs []int `json:"promptTokenIDs"`
		Finish         string
	} `json:"tools"`
	Completion struct {
		Object, Text, Finish string
	} `json:"completion"`
	Errors map[string]struct {
		Thrown      bool
		Class, Type string
		Status      int
		Code        any
	} `json:"errors"`
	Aborted    int `json:"aborted"`
	Structured []struct {
		Parsed *struct {
			Name *string
			Age  *float64
			Pets []string
		}
		Finish string
	} `json:"structured"`
	Required []struct {
		Finish, Name string
		Arguments    map[string]any
	} `json:"required"`
}

// TestServeOpenAIConformance drives `k3 serve` with the official openai npm
// client (tools/openai-conformance, installed by `npm ci` there; .ci/run
// does it) and checks what it saw against k3 chat and k3 template.
func TestServeOpenAIConformance(t *testing.T) {
	clients := fixture.NodeClients(t, "openai")
	dir := demoModel(t)
	const key = "conformance-key"
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--api-key", key, "--model-id", "k3-demo",
		"--queue", "0", "--chunk", "16", "--max-tokens", "8", "--keep-alive", "100ms")

	var got conformance
	clients.Run(t, &got, "conformance.mjs", "K3_BASE_URL="+url, "K3_API_KEY="+key, "K3_MODEL=k3-demo")

	// what k3 chat replies to the same conversation (greedy, same cap)
	e, tok := demomodel.Open(t, dir, 0)
	opt := chat.Options{Thinking: true, MaxTokens: 8, Sampling: engine.Sampling{Greedy: true}}
	r1, err := chat.NewSession(e, tok).Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)

	assert.Equal(t, []string{"k3-demo"}, got.Models)
	assert.Equal(t, "chat.completion", got.Chat.Object)
	require.NotNil(t, got.Chat.Reasoning)
	assert.Equal(t, coerce(r1.Reasoning), *got.Chat.Reasoning)
	assert.Equal(t, coerce(r1.Content), got.Chat.Content)
	assert.Equal(t, "length", got.Chat.Finish)
	assert.Equal(t, 8, got.Chat.Usage.CompletionTokens)
	assert.Equal(t, got.Chat.Usage.PromptTokens+8, got.Chat.Usage.TotalTokens)

	// streamed: the same reply, the role once, one finish reason, usage
	assert.Equal(t, []string{"assistant"}, got.Stream.Roles)
	assert.Equal(t, *got.Chat.Reasoning, got.Stream.Reasoning)
	assert.Equal(t, got.Chat.Content, got.Stream.Content)
	assert.Equal(t, []string{"length"}, got.Stream.Finish)
	require.NotNil(t, got.Stream.Usage)
	assert.Equal(t, got.Chat.Usage.PromptTokens, got.Stream.Usage.PromptTokens)
	assert.Equal(t, 8, got.Stream.Usage.CompletionTokens)
	// logprobs streamed, gathered by the client: the reply's own
	assert.NotEmpty(t, got.Logprobs.Plain)
	assert.Equal(t, got.Logprobs.Plain, got.Logprobs.Streamed)
	assert.Equal(t, got.Logprobs.PlainContent, got.Logprobs.StreamedContent)
	for _, e := range got.Logprobs.Streamed {
		assert.Equal(t, 2.0, e[2], "top_logprobs: %v", e)
	}

	// the second turn equals k3 chat's over the same conversation, and
	// reuses the state of the first
	s2 := chat.NewSession(e, tok)
	s2.SetHistory([]chat.Message{{Role: "user", Content: "Hello there"}, {Role: "assistant", Content: got.Chat.Content, ReasoningContent: *got.Chat.Reasoning}})
	r2, err := s2.Turn(context.Background(), "And again?", opt, nil)
	require.NoError(t, err)
	require.NotNil(t, got.Turn2.Reasoning)
	assert.Equal(t, coerce(r2.Reasoning), *got.Turn2.Reasoning)
	assert.Equal(t, coerce(r2.Content), got.Turn2.Content)
	cached := got.Turn2.Usage.PromptTokensDetails.CachedTokens
	assert.GreaterOrEqual(t, cached, got.Chat.Usage.PromptTokens-1)
	assert.Equal(t, itoa(cached), got.Turn2.ReusedHeader)
	t.Logf("turn 2 over the API: %d of %d prompt positions reused", cached, got.Turn2.Usage.PromptTokens)

	// the tools request was rendered as k3 template renders it
	msgFile := filepath.Join(t.TempDir(), "messages.json")
	writeFile(t, msgFile, `{"messages": [{"role": "system", "content": "You can look up the weather."}, {"role": "user", "content": "Weather in Paris?"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
		"parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}],
		"tool_choice": "auto"}`)
	code, tmplOut, tmplErr := runK3("template", "--tok", dir, "--messages", msgFile)
	require.Equal(t, ExitOK, code, tmplErr)
	var tmpl struct {
		IDs []int `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(tmplOut), &tmpl))
	assert.Equal(t, tmpl.IDs, got.Tools.PromptTokenIDs)

	assert.Equal(t, "text_completion", got.Completion.Object)
	assert.NotEmpty(t, got.Completion.Finish)

	for name, want := range map[string]struct {
		class  string
		status int
	}{
		"model": {"NotFoundError", 404}, "badRequest": {"BadRequestError", 400},
		"key": {"AuthenticationError", 401}, "busy": {"RateLimitError", 429},
	} {
		e := got.Errors[name]
		assert.True(t, e.Thrown, name)
		assert.Equal(t, want.class, e.Class, name)
		assert.Equal(t, want.status, e.Status, name)
	}
	assert.Equal(t, 2, got.Aborted)

	// structured output: parse() with a zod schema succeeded every time
	// (it throws otherwise) and the values fit it; a required call's
	// arguments parsed
	require.Len(t, got.Structured, 4)
	for i, r := range got.Structured {
		require.NotNil(t, r.Parsed, "seed %d", i)
		require.NotNil(t, r.Parsed.Name, "seed %d", i)
		require.NotNil(t, r.Parsed.Age, "seed %d", i)
		assert.Equal(t, float64(int64(*r.Parsed.Age)), *r.Parsed.Age, "seed %d", i)
		for _, p := range r.Parsed.Pets {
			assert.Contains(t, []string{"cat", "dog"}, p)
		}
		assert.Equal(t, "stop", r.Finish, "seed %d", i)
	}
	require.Len(t, got.Required, 2)
	for i, r := range got.Required {
		assert.Equal(t, "tool_calls", r.Finish, "seed %d", i)
		assert.Equal(t, "get_weather", r.Name, "seed %d", i)
		assert.IsType(t, "", r.Arguments["city"], "seed %d", i)
	}

	// the aborted generation ends within one layer's work
	require.Eventually(t, func() bool {
		resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Generating bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && !h.Generating
	}, 30*time.Second, 10*time.Millisecond)

	// raw SSE, which the client does not show: comments while the prompt is
	// read, data lines in order, [DONE] last
	body := `{"model":"k3-demo","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"` + strings.Repeat("read me slowly ", 12) + `"}]}`
	req, _ := http.NewRequest("POST", url+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	resp.Body.Close()
	require.NotEmpty(t, lines)
	assert.Equal(t, "no", resp.Header.Get("X-Accel-Buffering"))
	assert.Equal(t, "data: [DONE]", lines[len(lines)-1])
	assert.Contains(t, lines[0], `"role":"assistant"`)
	var comments int
	for _, l := range lines {
		if strings.HasPrefix(l, ": prefill ") {
			comments++
		}
	}
	assert.GreaterOrEqual(t, comments, 2)

	code, out, errs := stop()
	assert.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "cancelled")
	assert.NotContains(t, out+errs, key, "the key is never logged")
	assert.Regexp(t, `\(1 cancelled\)`, out, "the aborted stream cancelled its generation")
}

func TestServeRefusals(t *testing.T) {
	dir := demoModel(t)
	code, _, errs := runK3("serve", dir, "--addr", "0.0.0.0:0")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "--api-key")
	code, _, errs = runK3("serve")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "MODEL_DIR")
	code, _, _ = runK3("serve", dir, "--queue", "-1")
	assert.Equal(t, ExitUsage, code)
}

// TestServeStartsAndStops: the plain way, with the default flags on a free
// port: health answers, Ctrl-C stops it with exit 0.
func TestServeStartsAndStops(t *testing.T) {
	dir := demoModel(t)
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--quiet")
	resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	code, out, _ := stop()
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "stopped after 1 requests")
}
