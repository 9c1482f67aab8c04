package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	demoasset "k3/assets/demo"
	"k3/engine"
	"k3/internal/fixture"
	"k3/tokenizer"
)

// TestCORSEchoesRequestedHeaders: a preflight from an allowed origin is
// answered with the headers it asks for (the official SDKs send their
// own), and the k3 headers a page may read are exposed; a refused origin
// gets none of it.
func TestCORSEchoesRequestedHeaders(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.CORSOrigins = []string{"http://app.example"} })
	const asked = "authorization,content-type,x-stainless-os,x-stainless-retry-count,anthropic-version,anthropic-dangerous-direct-browser-access"
	preflight := func(origin string) *http.Response {
		req, err := http.NewRequest("OPTIONS", "http://"+s.Addr()+"/v1/messages", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", asked)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := preflight("http://app.example")
	assert.Equal(t, 204, resp.StatusCode)
	assert.Equal(t, "http://app.example", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, asked, resp.Header.Get("Access-Control-Allow-Headers"))
	assert.Contains(t, resp.Header.Values("Vary"), "Access-Control-Request-Headers")
	assert.Equal(t, "X-K3-Reused-Positions, Retry-After", resp.Header.Get("Access-Control-Expose-Headers"))

	// the actual request: the reuse header is readable by the page
	r, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": hi, "max_tokens": 2}, "Origin", "http://app.example")
	require.Equal(t, 200, r.StatusCode, string(data))
	assert.Equal(t, "X-K3-Reused-Positions, Retry-After", r.Header.Get("Access-Control-Expose-Headers"))
	assert.NotEmpty(t, r.Header.Get("X-K3-Reused-Positions"))

	resp = preflight("http://evil.example")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Headers"))
	assert.Empty(t, resp.Header.Get("Access-Control-Expose-Headers"))
}

// TestRetryAfterOn429: while the only generation runs and no place may
// wait, every generating endpoint answers 429 with Retry-After.
func TestRetryAfterOn429(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.Queue = -1 })
	js, _ := json.Marshal(map[string]any{"max_tokens": 100000, "stream": true, "messages": hi,
		"chat_template_kwargs": map[string]any{"thinking": false}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+s.Addr()+"/v1/chat/completions", bytes.NewReader(js))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		require.NoError(t, err)
		if strings.Contains(line, `"content"`) {
			break // it generates
		}
	}
	for path, body := range map[string]any{
		"/v1/chat/completions": map[string]any{"messages": hi},
		"/v1/completions":      map[string]any{"prompt": "hi"},
		"/v1/responses":        map[string]any{"input": "hi"},
		"/v1/messages":         map[string]any{"messages": hi, "max_tokens": 4},
	} {
		r, data := post(t, s, path, body)
		assert.Equal(t, 429, r.StatusCode, "%s: %s", path, data)
		assert.Equal(t, "1", r.Header.Get("Retry-After"), path)
	}
	cancel()
}

// TestCompletionsSkipSpecialTokens: a completion's text leaves out the
// control tokens it generated unless skip_special_tokens is false, streamed
// or not; token_ids keep them either way.
func TestCompletionsSkipSpecialTokens(t *testing.T) {
	s, g := scriptedServer(t, "Hi<|open|>response<|sep|>there")
	text := func(extra map[string]any) (string, string, []int) {
		req := map[string]any{"prompt": "x", "max_tokens": 20, "return_token_ids": true}
		for k, v := range extra {
			req[k] = v
		}
		resp, data := post(t, s, "/v1/completions", req)
		require.Equal(t, 200, resp.StatusCode, string(data))
		var r struct {
			Choices []struct {
				Text     string `json:"text"`
				TokenIDs []int  `json:"token_ids"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal(data, &r))
		req["stream"] = true
		delete(req, "return_token_ids")
		js, _ := json.Marshal(req)
		sresp, err := http.Post("http://"+s.Addr()+"/v1/completions", "application/json", bytes.NewReader(js))
		require.NoError(t, err)
		defer sresp.Body.Close()
		var streamed strings.Builder
		for _, ev := range readSSE(t, sresp.Body) {
			var c struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			}
			if ev.data != "" && ev.data != "[DONE]" && json.Unmarshal([]byte(ev.data), &c) == nil && len(c.Choices) > 0 {
				streamed.WriteString(c.Choices[0].Text)
			}
		}
		return r.Choices[0].Text, streamed.String(), r.Choices[0].TokenIDs
	}
	plain, plainStreamed, ids := text(nil)
	assert.Equal(t, "Hiresponsethere", plain)
	assert.Equal(t, plain, plainStreamed)
	assert.Equal(t, g.tok.EncodeSpecial(g.output), ids)
	kept, keptStreamed, _ := text(map[string]any{"skip_special_tokens": false})
	assert.Equal(t, "Hi<|open|>response<|sep|>there", kept)
	assert.Equal(t, kept, keptStreamed)
	same, _, _ := text(map[string]any{"skip_special_tokens": true})
	assert.Equal(t, plain, same)
}

// TestMetrics: GET /metrics gives the counters in Prometheus' text
// format, behind the API key.
func TestMetrics(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.APIKey = "sekret"; o.Queue = 3 })
	resp, _ := get(t, s, "/metrics")
	assert.Equal(t, 401, resp.StatusCode, "the key is needed")
	r, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": hi, "max_tokens": 5,
		"chat_template_kwargs": map[string]any{"thinking": false}}, "Authorization", "Bearer sekret")
	require.Equal(t, 200, r.StatusCode, string(data))
	resp, data = get(t, s, "/metrics", "Authorization", "Bearer sekret")
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	st := s.Stats()
	vals := map[string]string{}
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "# TYPE ") {
			typed[f[2]] = true
		} else if !strings.HasPrefix(line, "#") {
			require.Len(t, f, 2, line)
			require.True(t, strings.HasPrefix(f[0], "k3_"), line)
			vals[f[0]] = f[1]
		}
	}
	for name := range vals {
		assert.True(t, typed[name], "%s has a TYPE line", name)
	}
	assert.Equal(t, map[string]string{
		"k3_requests_total":                    strconv.FormatInt(st.Requests, 10),
		"k3_generations_total":                 "1",
		"k3_generations_cancelled_total":       "0",
		"k3_prompt_positions_reused_total":     strconv.FormatInt(st.Reused, 10),
		"k3_prompt_positions_prefilled_total":  strconv.FormatInt(st.Prefilled, 10),
		"k3_generated_tokens_total":            "5",
		"k3_generating":                        "0",
		"k3_queue_waiting":                     "0",
		"k3_queue_size":                        "3",
		"k3_request_bodies_in_flight_bytes":    "0",
		"k3_last_generation_seconds_per_token": vals["k3_last_generation_seconds_per_token"],
	}, vals)
	assert.Equal(t, int64(1), st.Requests, "the chat request; scrapes are not counted")
	assert.Positive(t, st.Prefilled)
	spt, err := strconv.ParseFloat(vals["k3_last_generation_seconds_per_token"], 64)
	require.NoError(t, err)
	assert.Positive(t, spt)
}

// TestModelCapabilities: /v1/models/ID carries k3's own fields.
func TestModelCapabilities(t *testing.T) {
	s, e, _ := start(t, func(o *Options) { o.MaxContext = 4096; o.Queue = 5 })
	resp, data := get(t, s, "/v1/models/k3-demo")
	require.Equal(t, 200, resp.StatusCode, string(data))
	var card struct {
		ID string         `json:"id"`
		K3 map[string]any `json:"k3"`
	}
	require.NoError(t, json.Unmarshal(data, &card))
	assert.Equal(t, "k3-demo", card.ID)
	assert.Equal(t, map[string]any{"context_length": 4096.0, "thinking": true, "tools": true, "structured_output": true,
		"drafter": e.Model().DraftModel() != nil, "queue": 5.0}, card.K3)
	resp, data = get(t, s, "/v1/models")
	require.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(data), `"context_length":4096`)
}

// TestModelCapabilitiesDrafter: with a draft model loaded (the trained
// demo's), the card says so.
func TestModelCapabilitiesDrafter(t *testing.T) {
	dir := fixture.ModelDir("demo")
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}, Draft: filepath.Join(dir, "..", demoasset.DraftDir)})
	require.NoError(t, err)
	e := m.NewEngine(1)
	t.Cleanup(func() { e.Close(); m.Close() })
	require.NotNil(t, m.DraftModel())
	s, err := New(Options{Engine: e, Tok: tok, ModelID: "demo"})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/v1/models/demo", nil))
	require.Equal(t, 200, rec.Code, rec.Body.String())
	var card struct {
		K3 map[string]any `json:"k3"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &card))
	assert.Equal(t, map[string]any{"thinking": true, "tools": true, "structured_output": true, "drafter": true, "queue": 8.0}, card.K3,
		"no context cap: no context_length")
}
