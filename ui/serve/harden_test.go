package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/openai"
)

var hi = []map[string]any{{"role": "user", "content": "hi"}}

// rawRequest sends head and body on a new connection and leaves it open.
func rawRequest(t *testing.T, s *Server, head string, body []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write(append([]byte(head), body...))
	require.NoError(t, err)
	return c
}

// status reads the status line of the response on c (the read is bounded
// so a server that never answers fails the test instead of hanging it).
func status(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err, "the server did not answer")
	return strings.TrimSpace(line)
}

// TestKeepAliveTiny: a keep-alive of 1 ns streams (was: NewTicker panic,
// the process died).
func TestKeepAliveTiny(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.KeepAlive = time.Nanosecond })
	resp, evs := streamPost(t, s, map[string]any{"max_tokens": 3, "stream": true, "messages": hi})
	assert.Equal(t, 200, resp.StatusCode)
	require.NotEmpty(t, evs)
	assert.Equal(t, "[DONE]", evs[len(evs)-1].data)
}

// TestShortBodyNeverHoldsTheSlot: a streamed request whose body stops
// short of its Content-Length, or a chunked body without its last chunk,
// gets 408 and never takes the only generation slot (was: held forever).
func TestShortBodyNeverHoldsTheSlot(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.Queue = -1; o.BodyTimeout = 300 * time.Millisecond })
	b, _ := json.Marshal(map[string]any{"messages": hi, "stream": true, "max_tokens": 5})
	short := rawRequest(t, s, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b)+100), b)
	chunked := rawRequest(t, s, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
		fmt.Appendf(nil, "%x\r\n%s\r\n", len(b), b))
	assert.Equal(t, "HTTP/1.1 408 Request Timeout", status(t, short))
	assert.Equal(t, "HTTP/1.1 408 Request Timeout", status(t, chunked))
	assert.Equal(t, int64(0), s.Stats().Generations)
	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": hi, "max_tokens": 2})
	assert.Equal(t, 200, resp.StatusCode, string(data))
	assert.Equal(t, int64(0), s.bodies.inUse())
}

// TestStalledReaderIsCutOff: a streaming client that stops reading is cut
// off by the write deadline; its generation is cancelled and the next
// request is served (was: the engine and the queue froze).
func TestStalledReaderIsCutOff(t *testing.T) {
	// a long model id makes every chunk large, so the socket buffers fill
	s, _, _ := start(t, func(o *Options) {
		o.Queue = -1
		o.WriteTimeout = 200 * time.Millisecond
		o.ModelID = strings.Repeat("m", 64<<10)
	})
	b, _ := json.Marshal(map[string]any{"messages": hi, "stream": true, "max_tokens": 100000, "chat_template_kwargs": map[string]any{"thinking": false}})
	rawRequest(t, s, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b)), b)
	require.Eventually(t, func() bool { return s.Stats().Cancelled == 1 }, 60*time.Second, 10*time.Millisecond,
		"the stalled stream was not cut off")
	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": hi, "max_tokens": 2})
	assert.Equal(t, 200, resp.StatusCode, string(data))
}

// TestBodiesInFlightBounded: bodies being read count against
// BodiesInFlight; past it requests get 429 before their body is read, and
// a body over MaxBodyBytes is refused by its Content-Length, unread.
func TestBodiesInFlightBounded(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.MaxBodyBytes = 1 << 20; o.BodiesInFlight = 2 << 20; o.MaxContext = 200 })
	const cl = 1 << 20
	var held []net.Conn
	for range 2 {
		held = append(held, rawRequest(t, s, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", cl), []byte(`{"messages":`)))
	}
	require.Eventually(t, func() bool { return s.bodies.inUse() == 2*cl }, 60*time.Second, 5*time.Millisecond)
	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"messages": hi, "max_tokens": 2})
	assert.Equal(t, 429, resp.StatusCode)
	assert.Contains(t, string(data), "busy reading other requests")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	big := rawRequest(t, s, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n", nil)
	assert.Equal(t, "HTTP/1.1 413 Request Entity Too Large", status(t, big))
	for _, c := range held {
		c.Close()
	}
	require.Eventually(t, func() bool { return s.bodies.inUse() == 0 }, 60*time.Second, 5*time.Millisecond)

	// 20 at once, each 900 KB of text far past the context: each is
	// refused (400 by the cheap check before tokenizing, or 429 unread,
	// when the client may see the connection closed before it sent the
	// whole body), and never more than the cap is held
	body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", 900_000)}}})
	var wg sync.WaitGroup
	codes := make([]int, 20)
	msgs := make([]string, 20)
	for i := range codes {
		wg.Go(func() {
			r, err := http.Post("http://"+s.Addr()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				msgs[i] = err.Error()
			} else {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				codes[i], msgs[i] = r.StatusCode, string(b)
			}
		})
	}
	wg.Wait()
	n400 := 0
	for i, c := range codes {
		switch c {
		case 400:
			n400++
			assert.Contains(t, msgs[i], "the prompt has at least", "refused before it was tokenized")
		case 429:
			assert.Contains(t, msgs[i], "busy reading other requests")
		case 0:
			t.Logf("request %d: %s", i, msgs[i])
		default:
			t.Errorf("request %d: %d %s", i, c, msgs[i])
		}
	}
	assert.Positive(t, n400, "some were read and checked")
	assert.Equal(t, int64(0), s.bodies.inUse())
	assert.Equal(t, int64(0), s.Stats().Generations)
}

// TestLoopbackGuard: with no key, only loopback Host names are served and
// a foreign Origin is refused unless --cors allows it (a web page's
// text/plain POST, a DNS-rebinding Host); with a key both pass to the key
// check.
func TestLoopbackGuard(t *testing.T) {
	s, _, _ := start(t, nil)
	do := func(s *Server, method, host, origin, ctype, body string, hdr ...string) (int, string) {
		req, err := http.NewRequest(method, "http://"+s.Addr()+"/v1/"+map[bool]string{true: "chat/completions", false: "models"}[method == "POST"], strings.NewReader(body))
		require.NoError(t, err)
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, b := send(t, req, hdr)
		return resp.StatusCode, string(b)
	}
	_, port, _ := net.SplitHostPort(s.Addr())
	code, body := do(s, "GET", "attacker.example:"+port, "", "", "")
	assert.Equal(t, 403, code)
	var e openai.ErrorBody
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	require.NotNil(t, e.Error)
	assert.Contains(t, e.Error.Message, "not a loopback name")
	for _, h := range []string{"localhost:" + port, "127.0.0.1:" + port, "localhost", "[::1]:" + port} {
		code, body = do(s, "GET", h, "", "", "")
		assert.Equal(t, 200, code, h+" "+body)
	}
	chatBody := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	code, body = do(s, "POST", "", "http://evil.example", "text/plain", chatBody)
	assert.Equal(t, 403, code)
	assert.Contains(t, body, "http://evil.example")
	assert.Equal(t, int64(0), s.Stats().Generations, "the page's POST made no generation")

	s2, _, _ := start(t, func(o *Options) { o.CORSOrigins = []string{"http://app.example"} })
	code, body = do(s2, "POST", "", "http://app.example", "application/json", chatBody)
	assert.Equal(t, 200, code, body)
	code, _ = do(s2, "POST", "", "http://evil.example", "application/json", chatBody)
	assert.Equal(t, 403, code)

	s3, _, _ := start(t, func(o *Options) { o.APIKey = "k" })
	_, port3, _ := net.SplitHostPort(s3.Addr())
	code, _ = do(s3, "GET", "myhost.example:"+port3, "", "", "", "Authorization", "Bearer k")
	assert.Equal(t, 200, code, "with a key the Host is not checked")
	code, _ = do(s3, "GET", "myhost.example:"+port3, "", "", "")
	assert.Equal(t, 401, code)
}

// twoClients returns HTTP clients that connect from 127.0.0.1 and from
// 127.0.0.2 (two remote addresses), or skips t where there is no
// 127.0.0.2.
func twoClients(t *testing.T) (*http.Client, *http.Client) {
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skip("this machine has no 127.0.0.2 to be a second client from (macOS without an alias)")
	} else {
		ln.Close()
	}
	from := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	return from("127.0.0.1"), from("127.0.0.2")
}

// TestReuseShownOnlyToItsClient: cached_tokens and X-K3-Reused-Positions
// report the kept state's reuse to the client (remote address) whose
// request left it; another client's request reuses nothing of it, so
// neither the numbers nor the timing tell it whether its guess of the
// other's prompt was right (was: an oracle on the previous client's
// prompt, audit V11).
func TestReuseShownOnlyToItsClient(t *testing.T) {
	a, b := twoClients(t)
	s, _, _ := start(t, nil)
	victim := []map[string]any{{"role": "user", "content": "My password is hunter2. Tell me a saying."}}
	ask := func(c *http.Client, maxTokens int) (int, string) {
		js, _ := json.Marshal(map[string]any{"messages": victim, "max_tokens": maxTokens})
		resp, err := c.Post("http://"+s.Addr()+"/v1/chat/completions", "application/json", bytes.NewReader(js))
		require.NoError(t, err)
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode, string(data))
		return decodeChat(t, data).Usage.PromptTokensDetails.CachedTokens, resp.Header.Get("X-K3-Reused-Positions")
	}
	ask(a, 4)
	cached, hdr := ask(a, 1)
	assert.Positive(t, cached, "the same client sees its own reuse")
	assert.Equal(t, strconv.Itoa(cached), hdr)
	ask(a, 4)
	before := s.Stats().Reused
	cached, hdr = ask(b, 1)
	assert.Equal(t, 0, cached, "another client learns nothing of the kept state")
	assert.Equal(t, "0", hdr)
	assert.Equal(t, before, s.Stats().Reused, "another client's request reused nothing")
}

// TestDecodeRefusesTrailingData: the whole body must be one JSON value.
func TestDecodeRefusesTrailingData(t *testing.T) {
	s, _, _ := start(t, nil)
	resp, data := post(t, s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]} GARBAGE`)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(data), "not valid JSON")
}

// FuzzDecode: whatever the body, the request decoder and the checks run
// before the queue answer with a status in OpenAI's error shape or accept,
// without panicking; accepted requests fit the context.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{}],"tool_choice":"required"}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"1"}]}`,
		`{"model":"k3-demo","stop":["a"],"max_tokens":3,"temperature":0.5,"top_p":0.9,"top_k":-1,"seed":-1,"reasoning_effort":"low"}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"chat_template_kwargs":{"thinking":false}}`,
		`[1,2]`, `null`, `{`, "",
	} {
		f.Add([]byte(seed))
	}
	e, tok := demo(f)
	s, err := New(Options{Engine: e, Tok: tok, ModelID: "k3-demo", MaxContext: 512, MaxBodyBytes: 1 << 16})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
		var q openai.ChatRequest
		release, aerr := s.decode(w, r, &q)
		if aerr != nil {
			assert.GreaterOrEqual(t, aerr.Status, 400)
			assert.NotEmpty(t, aerr.Message)
			return
		}
		defer release()
		j := &job{}
		for _, check := range []func() *openai.Error{
			func() *openai.Error { return s.samplingOf(&q.Sampling, j) },
			func() *openai.Error { return s.chatPrompt(&q, j) },
			func() *openai.Error { return s.fit(j) },
		} {
			if aerr := check(); aerr != nil {
				assert.GreaterOrEqual(t, aerr.Status, 400)
				assert.NotEmpty(t, aerr.Message)
				return
			}
		}
		assert.Less(t, len(j.ids), 512)
		assert.Positive(t, j.maxTokens)
	})
}

// agentRequests are a small request of each agent endpoint and where its
// reply reports the cached tokens.
var agentRequests = []struct {
	path   string
	body   map[string]any
	cached func(reply map[string]any) any
}{
	{"/v1/responses", map[string]any{"input": "My password is hunter2. Tell me a saying.", "max_output_tokens": 2},
		func(r map[string]any) any {
			return r["usage"].(map[string]any)["input_tokens_details"].(map[string]any)["cached_tokens"]
		}},
	{"/v1/messages", map[string]any{"messages": []map[string]any{{"role": "user", "content": "My password is hunter2. Tell me a saying."}}, "max_tokens": 2},
		func(r map[string]any) any { return r["usage"].(map[string]any)["cache_read_input_tokens"] }},
}

// TestAgentEndpointsGuardedAndBounded: /v1/responses and /v1/messages
// read their body as chat completions do (a body short of its length gets
// 408, one over the cap 413, neither generates nor keeps its share of the
// bodies in flight) and are behind the loopback guard.
func TestAgentEndpointsGuardedAndBounded(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.Queue = -1; o.BodyTimeout = 300 * time.Millisecond })
	_, port, _ := net.SplitHostPort(s.Addr())
	for i, c := range agentRequests {
		body := map[string]any{"stream": true}
		for k, v := range c.body {
			body[k] = v
		}
		b, _ := json.Marshal(body)
		short := rawRequest(t, s, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", c.path, len(b)+100), b)
		assert.Equal(t, "HTTP/1.1 408 Request Timeout", status(t, short), c.path)
		big := rawRequest(t, s, "POST "+c.path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n", nil)
		assert.Equal(t, "HTTP/1.1 413 Request Entity Too Large", status(t, big), c.path)
		rebound := rawRequest(t, s, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: attacker.example:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", c.path, port, len(b)), b)
		assert.Equal(t, "HTTP/1.1 403 Forbidden", status(t, rebound), c.path)
		assert.Equal(t, int64(i), s.Stats().Generations, c.path+": none of these generated")
		resp, data := post(t, s, c.path, c.body)
		assert.Equal(t, 200, resp.StatusCode, string(data))
		assert.Equal(t, int64(0), s.bodies.inUse(), c.path)
	}
}

// TestAgentReuseShownOnlyToItsClient: the Responses and Messages usage
// (cached_tokens, cache_read_input_tokens) and X-K3-Reused-Positions show
// the kept state's reuse only to the client whose request left it.
func TestAgentReuseShownOnlyToItsClient(t *testing.T) {
	a, b := twoClients(t)
	s, _, _ := start(t, nil)
	for _, c := range agentRequests {
		ask := func(cl *http.Client) (float64, string) {
			js, _ := json.Marshal(c.body)
			resp, err := cl.Post("http://"+s.Addr()+c.path, "application/json", bytes.NewReader(js))
			require.NoError(t, err)
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			require.Equal(t, 200, resp.StatusCode, string(data))
			var r map[string]any
			require.NoError(t, json.Unmarshal(data, &r), string(data))
			return c.cached(r).(float64), resp.Header.Get("X-K3-Reused-Positions")
		}
		ask(a)
		cached, hdr := ask(a)
		assert.Positive(t, cached, c.path+": the same client sees its own reuse")
		assert.Equal(t, strconv.Itoa(int(cached)), hdr, c.path)
		ask(a)
		before := s.Stats().Reused
		cached, hdr = ask(b)
		assert.Equal(t, 0.0, cached, c.path+": another client learns nothing of the kept state")
		assert.Equal(t, "0", hdr, c.path)
		assert.Equal(t, before, s.Stats().Reused, c.path+": another client's request reused nothing")
	}
}
