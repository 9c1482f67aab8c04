package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	"k3/ui/serve"
)

func coerce(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// k3Serve starts a real k3 server on a loopback port over the demo model.
func k3Serve(t *testing.T) (*serve.Server, *engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	e, tok := demomodel.Open(t, demomodel.Dir(t), 2)
	s, err := serve.New(serve.Options{Engine: e, Tok: tok, ModelID: "k3-demo", APIKey: "key", KeepAlive: time.Hour})
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s, e, tok
}

// recorder keeps a turn's events.
type recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) on(ev engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) count(k engine.EventKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func (r *recorder) phases() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Kind == engine.EventPhase {
			out = append(out, ev.Text)
		}
	}
	return out
}

// TestAgainstK3Serve: a turn on k3 serve over HTTP gives k3 chat's reply;
// the second turn reuses the server's state; Stop closes the stream and
// keeps the partial reply.
func TestAgainstK3Serve(t *testing.T) {
	s, e, tok := k3Serve(t)
	c, err := New("http://"+s.Addr(), "key", "")
	require.NoError(t, err)
	assert.Equal(t, "http://"+s.Addr()+"/v1", c.BaseURL)
	ids, err := c.Models(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"k3-demo"}, ids)
	id, err := c.Resolve(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "k3-demo", id)

	opt := chat.Options{Thinking: true, System: "Be brief.", MaxTokens: 8, Sampling: engine.Sampling{Greedy: true}}
	sess := chat.NewSession(e, tok)
	want, err := sess.Turn(context.Background(), "Hello there", opt, nil)
	require.NoError(t, err)

	var rec recorder
	history := []chat.Message{{Role: "user", Content: "Hello there"}}
	r1, err := c.Turn(context.Background(), history, opt, rec.on)
	require.NoError(t, err)
	assert.Equal(t, coerce(want.Reasoning), r1.Message.ReasoningContent)
	assert.Equal(t, coerce(want.Content), r1.Message.Content)
	assert.Equal(t, chat.CutTurnCap, r1.Message.Cut)
	assert.Equal(t, "length", r1.Finish)
	require.NotNil(t, r1.Usage)
	assert.Equal(t, 8, r1.Usage.CompletionTokens)
	assert.Equal(t, r1.Deltas, rec.count(engine.EventToken))
	assert.Positive(t, r1.Deltas)
	assert.Positive(t, r1.FirstTokenSeconds)
	assert.Contains(t, strings.Join(rec.phases(), "|"), "the server is reading the prompt")

	history = append(history, r1.Message, chat.Message{Role: "user", Content: "And again?"})
	r2, err := c.Turn(context.Background(), history, opt, nil)
	require.NoError(t, err)
	require.NotNil(t, r2.Usage.PromptTokensDetails)
	assert.Positive(t, r2.Usage.PromptTokensDetails.CachedTokens, "the server reused the first turn's state")

	// Stop: cancel after a few deltas of a long reply
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	r3, err := c.Turn(ctx, history[:1], chat.Options{MaxTokens: 100000}, func(ev engine.Event) {
		if ev.Kind == engine.EventToken {
			if n++; n == 3 {
				cancel()
			}
		}
	})
	require.NoError(t, err)
	assert.Equal(t, chat.CutStopped, r3.Message.Cut)
	assert.NotEmpty(t, r3.Message.Content)
	require.Eventually(t, func() bool { return s.Stats().Cancelled == 1 }, 30*time.Second, 10*time.Millisecond,
		"closing the stream cancelled the server's generation")

	// a wrong key and a wrong model read plainly
	bad, _ := New("http://"+s.Addr()+"/v1", "nope", "k3-demo")
	_, err = bad.Turn(context.Background(), history[:1], opt, nil)
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 401, se.Status)
	assert.Contains(t, err.Error(), "refused the API key")
	other, _ := New("http://"+s.Addr()+"/v1", "key", "gpt-4o")
	_, err = other.Resolve(context.Background())
	assert.ErrorContains(t, err, `does not serve "gpt-4o"; it serves k3-demo`)
}

// stub replays a recorded stream and keeps the request it got.
type stub struct {
	t      *testing.T
	chunks []string
	got    map[string]any
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		fmt.Fprint(w, `{"object":"list","data":[{"id":"moonshotai/Kimi-K3","object":"model","owned_by":"vllm"}]}`)
		return
	case "/v1/chat/completions":
	default:
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	require.NoError(s.t, json.Unmarshal(body, &s.got))
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range s.chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func replay(t *testing.T, chunks []string) (*Client, *stub) {
	st := &stub{t: t, chunks: chunks}
	srv := httptest.NewServer(st)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/v1/", "", "")
	require.NoError(t, err)
	return c, st
}

const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"moonshotai/Kimi-K3",`

// vLLM's shape (--reasoning-parser kimi_k3 --tool-call-parser kimi_k3):
// thinking under "reasoning", one tool call whose arguments come in pieces.
var vllmStream = []string{
	head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"reasoning":"The user wants"},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"reasoning":" the weather."},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"content":"Let me check."},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"tool_calls":[{"id":"chatcmpl-tool-9f","type":"function","index":0,"function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
	head + `"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]}`,
	head + `"choices":[],"usage":{"prompt_tokens":40,"total_tokens":52,"completion_tokens":12}}`,
}

// SGLang's shape: thinking under "reasoning_content", nulls for absent
// fields, two tool calls told apart by index.
var sglangStream = []string{
	head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":"Two cities,","tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":" two calls.","tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{"id":null,"index":0,"type":"function","function":{"name":null,"arguments":"{\"city\": \"Oslo\"}"}}]},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{"id":"call_b","index":1,"type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Rome\"}"}}]},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
	head + `"choices":[{"index":0,"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"tool_calls","matched_stop":null}],"usage":null}`,
	head + `"choices":[],"usage":{"prompt_tokens":40,"total_tokens":50,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":32}}}`,
}

func TestVLLMStream(t *testing.T) {
	c, st := replay(t, vllmStream)
	var rec recorder
	opt := chat.Options{Thinking: true, System: "sys", Effort: "low", MaxTokens: 64, Sampling: engine.Sampling{Temperature: 0.6, TopP: 0.95, Seed: 3}}
	r, err := c.Turn(context.Background(), []chat.Message{{Role: "user", Content: "Weather in Paris?"}}, opt, rec.on)
	require.NoError(t, err)
	assert.Equal(t, "The user wants the weather.", r.Message.ReasoningContent)
	assert.Equal(t, "tool_calls", r.Finish)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, "chatcmpl-tool-9f", r.ToolCalls[0].ID)
	assert.Equal(t, "get_weather", r.ToolCalls[0].Function.Name)
	assert.JSONEq(t, `{"city":"Paris"}`, r.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "Let me check."+ToolCallText(r.ToolCalls[0]), r.Message.Content, "the call is shown in the reply")
	assert.Equal(t, chat.Cut(""), r.Message.Cut)
	assert.Equal(t, 1, rec.count(engine.EventTool))
	assert.Equal(t, 3, r.Deltas)
	assert.Equal(t, 3, rec.count(engine.EventToken))
	require.NotNil(t, r.Usage)
	assert.Equal(t, 12, r.Usage.CompletionTokens)

	// what was asked: the model from /models, the system prompt first,
	// thinking through chat_template_kwargs, sampling, a streamed usage
	assert.Equal(t, "moonshotai/Kimi-K3", st.got["model"])
	assert.Equal(t, true, st.got["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, st.got["stream_options"])
	assert.Equal(t, map[string]any{"thinking": true, "thinking_effort": "low"}, st.got["chat_template_kwargs"])
	assert.Equal(t, 0.6, st.got["temperature"])
	assert.Equal(t, 0.95, st.got["top_p"])
	assert.Equal(t, float64(64), st.got["max_tokens"])
	msgs := st.got["messages"].([]any)
	require.Len(t, msgs, 2)
	assert.Equal(t, map[string]any{"role": "system", "content": "sys"}, msgs[0])
}

func TestSGLangStream(t *testing.T) {
	c, st := replay(t, sglangStream)
	c.Model = "moonshotai/Kimi-K3"
	history := []chat.Message{
		{Role: "system", Content: "from the history"},
		{Role: "user", Content: "Oslo and Rome?"},
		{Role: "assistant", Content: "earlier", ReasoningContent: "thought"},
		{Role: "user", Content: "again"},
	}
	r, err := c.Turn(context.Background(), history, chat.Options{System: "ignored", Sampling: engine.Sampling{Greedy: true}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "Two cities, two calls.", r.Message.ReasoningContent)
	require.Len(t, r.ToolCalls, 2)
	assert.Equal(t, "call_a", r.ToolCalls[0].ID)
	assert.JSONEq(t, `{"city":"Oslo"}`, r.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "call_b", r.ToolCalls[1].ID)
	assert.JSONEq(t, `{"city":"Rome"}`, r.ToolCalls[1].Function.Arguments)
	assert.Equal(t, ToolCallText(r.ToolCalls[0])+ToolCallText(r.ToolCalls[1]), r.Message.Content)
	require.NotNil(t, r.Usage.PromptTokensDetails)
	assert.Equal(t, 32, r.Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, map[string]any{"thinking": false}, st.got["chat_template_kwargs"])
	assert.Equal(t, float64(0), st.got["temperature"])
	msgs := st.got["messages"].([]any)
	require.Len(t, msgs, 4, "the history's system message wins over the option")
	assert.Equal(t, map[string]any{"role": "assistant", "content": "earlier", "reasoning_content": "thought"}, msgs[2])
}

func TestStreamFailures(t *testing.T) {
	// an error event mid-stream
	c, _ := replay(t, []string{
		head + `"choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}`,
		`{"error":{"message":"engine failed","type":"server_error"}}`,
	})
	c.Model = "m"
	r, err := c.Turn(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "engine failed")
	assert.Equal(t, "par", r.Message.Content)
	assert.Equal(t, chat.CutStopped, r.Message.Cut)

	// a stream that ends without a finish reason or [DONE]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: "+head+`"choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]}`+"\n\n")
	}))
	defer srv.Close()
	c2, _ := New(srv.URL, "", "m")
	r, err = c2.Turn(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "before the reply was complete")
	assert.Equal(t, "half", r.Message.Content)

	// an error status in OpenAI's shape
	srv3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"message":"max_tokens is too large","type":"invalid_request_error"}}`)
	}))
	defer srv3.Close()
	c3, _ := New(srv3.URL, "", "m")
	_, err = c3.Turn(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, chat.Options{Thinking: true}, nil)
	assert.EqualError(t, err, "the server answered 400: max_tokens is too large")

	// nothing listening
	c4, _ := New("http://127.0.0.1:1/v1", "", "m")
	_, err = c4.Turn(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "could not reach the server")

	_, err = New("localhost:8000", "", "")
	assert.ErrorContains(t, err, "http://HOST:PORT/v1")
}
