//go:build linux || darwin

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"k3/engine/chat"
	"k3/ui/remote"
)

// serveCases start real `k3 serve` processes and play hostile clients.

// server is a running `k3 serve` process.
type server struct {
	addr string // HOST:PORT
	stop func() run
}

// serve starts `k3 serve DEMO --addr 127.0.0.1:0 args...` and waits for
// its address; stop sends SIGTERM and waits for the exit.
func (e *Env) serve(args ...string) (*server, error) {
	cmd := e.command(append([]string{"serve", e.Demo, "--addr", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	var rest bytes.Buffer
	go func() {
		re := regexp.MustCompile(`at http://(\S+)/v1`)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20) // the start line holds the model id
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
			rest.WriteString(sc.Text() + "\n")
		}
		if !sent {
			close(found)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() run {
		t0 := time.Now()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			return run{code: exitCode(err), stdout: rest.String(), stderr: errb.String(), dur: time.Since(t0)}
		case <-time.After(timeLimit):
			cmd.Process.Kill()
			<-done
			return run{code: -1, stderr: errb.String(), hung: true, dur: time.Since(t0)}
		}
	}
	select {
	case addr, ok := <-found:
		if !ok {
			r := stop()
			return nil, fmt.Errorf("k3 serve did not start: rc%d %s", r.code, lastLine(r.stderr))
		}
		return &server{addr: addr, stop: stop}, nil
	case <-time.After(timeLimit):
		stop()
		return nil, fmt.Errorf("k3 serve did not start within %s", timeLimit)
	}
}

// raw sends bytes on a new connection and returns it open.
func (s *server) raw(data string) (net.Conn, error) {
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		return nil, err
	}
	_, err = io.WriteString(c, data)
	return c, err
}

// statusLine reads the first line of the answer on c, within limit.
func statusLine(c net.Conn, limit time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(limit))
	l, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(l), err
}

// chat posts a small chat request (hdr: name, value pairs) and returns the
// status and body.
func (s *server) chat(client *http.Client, body string, hdr ...string) (int, string, http.Header, error) {
	req, err := http.NewRequest("POST", "http://"+s.addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), resp.Header, nil
}

const smallChat = `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`

// serveCase runs fn against a fresh server started with args; the result
// is fn's, unless the server panicked, or did not stop with rc0.
func serveCase(id, name, want string, args []string, fn func(e *Env, s *server) Result) Case {
	return Case{ID: id, Name: name, Want: want, Quick: true, Run: func(e *Env) Result {
		s, err := e.serve(args...)
		if err != nil {
			return Result{Wrong, err.Error(), -1}
		}
		res := fn(e, s)
		r := s.stop()
		switch {
		case panicked(r):
			return Result{Panic, firstLine(r.stderr, "panic:"), r.code}
		case r.hung:
			return Result{Hang, "k3 serve did not stop on SIGTERM", -1}
		case res.Verdict == Clear || res.Verdict == Ran:
			if r.code != 0 {
				return Result{Wrong, fmt.Sprintf("%s; then k3 serve exited %d: %s", res.Actual, r.code, lastLine(r.stderr)), r.code}
			}
		}
		return res
	}}
}

func verdict(ok bool, actual string) Result {
	if ok {
		return Result{Clear, actual, -1}
	}
	return Result{Wrong, actual, -1}
}

// bodyStall sends a streamed request whose body never ends (chunked
// without its last chunk, or 100 bytes short of its Content-Length), then
// a normal request: the first must get 408, the second 200.
func bodyStall(e *Env, s *server, chunked bool) Result {
	b := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5}`
	head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b)+100, b)
	if chunked {
		head = fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(b), b)
	}
	c, err := s.raw(head)
	if err != nil {
		return Result{Wrong, err.Error(), -1}
	}
	defer c.Close()
	line, err := statusLine(c, 20*time.Second)
	if err != nil {
		return Result{Hang, "no answer to the stalled body: " + err.Error(), -1}
	}
	code, body, _, err := s.chat(nil, smallChat)
	if err != nil {
		return Result{Hang, "the next request got no answer: " + err.Error(), -1}
	}
	return verdict(strings.Contains(line, "408") && code == 200, fmt.Sprintf("stalled: %s; next: %d %s", line, code, clip(body, 60)))
}

func serveCases() []Case {
	flag := func(id, name, msg string, args ...string) Case {
		return Case{ID: id, Name: name, Want: "rc2, one line", Quick: true, Run: func(e *Env) Result {
			return expect(e.k3(nil, append([]string{"serve", e.Demo, "--addr", "127.0.0.1:0"}, args...)...), 2, msg)
		}}
	}
	return []Case{
		flag("S.1", "serve --keep-alive 1ns", "at least 1ms", "--keep-alive", "1ns"),
		flag("S.2", "serve --keep-alive 0s", "at least 1ms", "--keep-alive", "0s"),
		flag("S.3", "serve --max-body-mb 1e13", "at most 1024", "--max-body-mb", "1e13"),
		flag("S.4", "serve --api-key with a trailing space", "holds a space", "--api-key", "abc "),
		serveCase("S.5", "streamed body 100 bytes short of its Content-Length", "408; the next request served",
			[]string{"--queue", "0", "--body-timeout", "300ms", "--quiet"}, func(e *Env, s *server) Result { return bodyStall(e, s, false) }),
		serveCase("S.6", "chunked body without its last chunk", "408; the next request served",
			[]string{"--queue", "0", "--body-timeout", "300ms", "--quiet"}, func(e *Env, s *server) Result { return bodyStall(e, s, true) }),
		serveCase("S.7", "streaming client that stops reading", "cut off; the next request served",
			[]string{"--queue", "0", "--write-timeout", "200ms", "--model-id", strings.Repeat("m", 64<<10)}, func(e *Env, s *server) Result {
				b := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":100000,"chat_template_kwargs":{"thinking":false}}`
				c, err := s.raw(fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b))
				if err != nil {
					return Result{Wrong, err.Error(), -1}
				}
				defer c.Close()
				// the server is free again once it cut the stalled stream off
				for t0 := time.Now(); time.Since(t0) < 20*time.Second; time.Sleep(50 * time.Millisecond) {
					if code, _, _, err := s.chat(nil, smallChat); err == nil && code == 200 {
						return Result{Clear, fmt.Sprintf("next request 200 after %.1fs", time.Since(t0).Seconds()), -1}
					}
				}
				return Result{Hang, "the stalled stream held the slot for 20 s", -1}
			}),
		serveCase("S.8", "Content-Length 10 GB, 1 KB sent", "413 at once", []string{"--quiet"}, func(e *Env, s *server) Result {
			c, err := s.raw("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n" + strings.Repeat("x", 1000))
			if err != nil {
				return Result{Wrong, err.Error(), -1}
			}
			defer c.Close()
			line, err := statusLine(c, 10*time.Second)
			if err != nil {
				return Result{Hang, "no answer: " + err.Error(), -1}
			}
			return verdict(strings.Contains(line, "413"), line)
		}),
		serveCase("S.9", "no key: Host attacker.example (DNS rebinding)", "403", []string{"--quiet"}, func(e *Env, s *server) Result {
			code, body, _, err := s.chat(nil, smallChat, "Host", "attacker.example")
			if err != nil {
				return Result{Wrong, err.Error(), -1}
			}
			return verdict(code == 403 && strings.Contains(body, "not a loopback name"), fmt.Sprintf("%d %s", code, clip(body, 100)))
		}),
		serveCase("S.10", "no key: text/plain POST from Origin evil.example", "403, no generation", []string{}, func(e *Env, s *server) Result {
			code, body, _, err := s.chat(nil, smallChat, "Content-Type", "text/plain", "Origin", "http://evil.example")
			if err != nil {
				return Result{Wrong, err.Error(), -1}
			}
			return verdict(code == 403, fmt.Sprintf("%d %s", code, clip(body, 100)))
		}),
		serveCase("S.11", "20 concurrent 900 KB bodies (context 64)", "each refused: 400 before tokenizing, or 429", []string{"--quiet", "--max-body-mb", "1", "--context", "64"}, func(e *Env, s *server) Result {
			body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", 900_000)}}})
			type answer struct {
				code int
				body string
				err  error
			}
			ch := make(chan answer, 20)
			for range 20 {
				go func() {
					code, b, _, err := s.chat(nil, string(body))
					ch <- answer{code, b, err}
				}()
			}
			counts := map[string]int{}
			for range 20 {
				a := <-ch
				switch {
				case a.err != nil:
					counts["closed"]++
				case a.code == 400 && !strings.Contains(a.body, "has at least"):
					counts["400 after tokenizing"]++
				default:
					counts[fmt.Sprint(a.code)]++
				}
			}
			ok := counts["200"] == 0 && counts["400"] > 0 && counts["400"]+counts["429"]+counts["closed"] == 20
			return verdict(ok, fmt.Sprintf("%v", counts))
		}),
		serveCase("S.12", "reuse oracle: client B probes client A's prompt", "B told cached_tokens 0", []string{"--quiet"}, func(e *Env, s *server) Result {
			from := func(ip string) *http.Client {
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
				return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
			}
			victim := `{"messages":[{"role":"user","content":"My password is hunter2. Tell me a saying."}],"max_tokens":%d}`
			cached := func(c *http.Client, n int) (int, error) {
				code, body, _, err := s.chat(c, fmt.Sprintf(victim, n))
				if err != nil || code != 200 {
					return 0, fmt.Errorf("%d %v %s", code, err, clip(body, 80))
				}
				var r struct {
					Usage struct {
						Details struct {
							Cached int `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					} `json:"usage"`
				}
				return r.Usage.Details.Cached, json.Unmarshal([]byte(body), &r)
			}
			if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
				return skip("no 127.0.0.2 to be a second client from")
			} else {
				ln.Close()
			}
			a, b := from("127.0.0.1"), from("127.0.0.2")
			cached(a, 4)
			own, err1 := cached(a, 1)
			cached(a, 4)
			other, err2 := cached(b, 1)
			if err1 != nil || err2 != nil {
				return Result{Wrong, fmt.Sprint(err1, err2), -1}
			}
			return verdict(own > 0 && other == 0, fmt.Sprintf("A's own repeat: cached %d; B's guess: cached %d", own, other))
		}),
		{ID: "S.13", Name: "--api-key-file: no key, wrong key, right key", Want: "401, 401, 200", Quick: true, Run: func(e *Env) Result {
			f := e.dir("key") + "/key"
			must(os.WriteFile(f, []byte("s3cret\n"), 0o600))
			return serveCase("", "", "", []string{"--quiet", "--api-key-file", f}, func(e *Env, s *server) Result {
				var got []int
				for _, k := range []string{"", "wrong", "s3cret"} {
					code, _, _, err := s.chat(nil, smallChat, "Authorization", "Bearer "+k)
					if err != nil {
						return Result{Wrong, err.Error(), -1}
					}
					got = append(got, code)
				}
				return verdict(fmt.Sprint(got) == "[401 401 200]", fmt.Sprint(got))
			}).Run(e)
		}},
	}
}

// remoteCases drive the app's remote client (ui/remote, a library no k3
// command runs) in this process against loopback servers that misbehave.
func remoteCases() []Case {
	user := []chat.Message{{Role: "user", Content: "x"}}
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`
	content := func(s string) string {
		return "data: " + head + `"choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	stop := "data: " + head + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	turn := func(ctype string, maxTokens int, write func(w http.ResponseWriter, r *http.Request)) (*remote.Result, error) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", ctype)
			write(w, r)
		}))
		defer srv.Close()
		c, err := remote.New(srv.URL, "", "m")
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Turn(ctx, user, chat.Options{Thinking: true, MaxTokens: maxTokens}, nil)
	}
	text := func(s string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s) }
	}
	refused := func(id, name, ctype, want string, write func(http.ResponseWriter, *http.Request)) Case {
		return Case{ID: id, Name: name, Want: "error: " + want, Quick: true, Run: func(e *Env) Result {
			_, err := turn(ctype, 10, write)
			if err == nil {
				return Result{Loss, "accepted as a reply, no error", -1}
			}
			return verdict(strings.Contains(err.Error(), want), err.Error())
		}}
	}
	return []Case{
		refused("R.1", "remote: lines without data:, then [DONE]", "text/event-stream", "held no events",
			text("{\"choices\":[]}\nevent: x\nid: 1\n\ndata: [DONE]\n\n")),
		refused("R.2", "remote: a 200 HTML page", "text/html", "it was text/html", text("<html>hello</html>")),
		{ID: "R.3", Name: "remote: UTF-8 BOM before the first event", Want: "read: reply \"Hello\"", Quick: true, Run: func(e *Env) Result {
			r, err := turn("text/event-stream", 10, text("\ufeff"+content("Hello")+stop+"data: [DONE]\n\n"))
			if err != nil {
				return Result{Wrong, err.Error(), -1}
			}
			if r.Message.Content != "Hello" {
				return Result{Loss, fmt.Sprintf("reply %q", r.Message.Content), -1}
			}
			return Result{Ran, "reply \"Hello\", finish " + r.Finish, -1}
		}},
		refused("R.4", "remote: one 5 MiB data: line", "text/event-stream", "longer than 4 MiB", text("data: "+strings.Repeat("x", 5<<20)+"\n\n")),
		refused("R.5", "remote: endless deltas, 10 tokens asked", "text/event-stream", "more than the 10 tokens asked for",
			func(w http.ResponseWriter, r *http.Request) {
				for r.Context().Err() == nil {
					if _, err := io.WriteString(w, content(strings.Repeat("a", 1000))); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}),
		refused("R.6", "remote: [DONE] with no text and no finish reason", "text/event-stream", "no reply text",
			text("data: "+head+`"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\ndata: [DONE]\n\n")),
	}
}
