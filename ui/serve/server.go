// Package serve is k3's OpenAI-compatible HTTP server: GET /v1/models,
// POST /v1/chat/completions (streamed as server-sent events or not),
// POST /v1/completions, POST /v1/responses (OpenAI's Responses API,
// stateless), POST /v1/messages (Anthropic's Messages API) and GET /health,
// over one engine. Chat requests are
// rendered in the K3 XTML chat format and the reply is read back into
// reasoning_content, content and tool_calls. One generation runs at a time
// (a bounded FIFO queue waits); a client that goes away cancels its
// generation within one layer's work; the engine state of the last request
// is kept and reused when the next one extends it. `k3 serve` and the
// desktop app both start it.
package serve

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/ui/openai"
)

// Options configure a Server.
type Options struct {
	Engine  *engine.Engine
	Tok     *tokenizer.Tokenizer
	ModelID string // the id /v1/models lists and requests name
	// ModelAliases are more model names requests may give, served by this
	// model (agents with fixed model names); "*" accepts any name.
	ModelAliases []string
	// APIKey, when set, is required on every /v1 request, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY". It is never logged.
	APIKey string
	// Queue is how many requests may wait while one generates (0: 8,
	// negative: none); more are refused with 429.
	Queue int
	// MaxBodyBytes caps a request body (0: 8 MiB); larger ones get 413.
	MaxBodyBytes int64
	// BodiesInFlight caps the bytes of request bodies being read and
	// checked at once (0: 4 x MaxBodyBytes); a request whose body would pass
	// it gets 429 before its body is read.
	BodiesInFlight int64
	// BodyTimeout is how long a request body may take to arrive, whole
	// (0: 30 s); a body that stops short gets 408 and never takes a queue
	// place.
	BodyTimeout time.Duration
	// WriteTimeout is how long one write of a response may block (0: 30 s):
	// a client that stops reading a stream is cut off and its generation
	// cancelled, so the queue goes on.
	WriteTimeout time.Duration
	// CORSOrigins are the browser origins allowed to call the server ("*":
	// any). None: no CORS headers, so browsers refuse cross-origin calls.
	CORSOrigins []string
	// MaxContext caps prompt plus reply positions (0: no cap); a reply cap
	// that would pass it is lowered, a prompt that fills it is refused.
	// `k3 serve` and the app's server default to DefaultContext.
	MaxContext int
	// Grow, when set, is asked before each generation (under Lock) for
	// the positions it may reach, prompt and reply: a server whose memory
	// plan reserved fewer grows it, or refuses the request with the error
	// (it names the limit). Nil: the plan reserved MaxContext.
	Grow func(positions int) error
	// DefaultMaxTokens is the reply cap of a request that gives none
	// (0: chat.DefaultMaxTokens).
	DefaultMaxTokens int
	// KeepAlive is how often a streamed response gets an SSE comment while
	// it waits in the queue or a step takes long (0: 5 s). Prefill progress
	// comments go out on every prompt chunk besides.
	KeepAlive time.Duration
	// Lock, when set, is held around every generation: the app passes the
	// lock of its own chat so the two never run the engine at once.
	Lock sync.Locker
	// Observe, when set, gets every engine event of each generation (the
	// prompt's progress, each token with its step time and counters, the
	// reply's text), on the generation's goroutine, under Lock: the app's
	// Engine panel follows its server's requests with it.
	Observe func(engine.Event)
	// Fit are the options the model was opened with: the server's chat
	// session keeps the state copies they allow (chat.Session.FitBudget;
	// the zero value: a snapshot).
	Fit engine.Options
	// Log receives one line per request (nil: none).
	Log *log.Logger
	// PromptCache, when set, keeps state snapshots of the prompts read, so
	// a request that starts like an earlier one (an agent's next step,
	// after a side request or a restart) reads only the rest. It is
	// partitioned by the API key a request presents and by its
	// prompt_cache_key (Messages: metadata.user_id): no request reuses
	// another partition's prompt, nor learns from the timing whether
	// another client sent it. A keyless server on loopback is one user's.
	PromptCache engine.PromptCache
	// SharedCache puts every request in one partition (an explicit opt-in:
	// clients then learn from the timing what others sent).
	SharedCache bool
}

// DefaultContext is the positions per request, prompt and reply, that
// `k3 serve` plans and the app's server accepts unless told otherwise:
// agents send prompts of 13-37K positions.
const DefaultContext = 16384

// Stats are the server's counters.
type Stats struct {
	Requests    int64 // requests that reached a handler
	Generations int64 // generations that ran
	Cancelled   int64 // generations stopped because the client went away
	Reused      int64 // prompt positions reused from the kept state, summed
	Prefilled   int64 // prompt positions read, summed
	Tokens      int64 // reply tokens generated, summed
}

// generator runs one reply over a rendered transcript; a chat.Session,
// which keeps the state of the previous reply for the next to reuse.
type generator interface {
	Generate(ctx context.Context, ids []int, o chat.PromptOptions, on func(engine.Event)) (*chat.Reply, error)
}

// Server serves one model. Create it with New; serve with Start or Handler.
type Server struct {
	o       Options
	q       queue
	sess    generator
	created int64

	base   context.Context // parent of every request: Stop cancels it
	cancel context.CancelFunc

	mu sync.Mutex
	hs *http.Server
	ln net.Listener

	requests, generations, cancelled, reused, prefilled, tokens atomic.Int64
	secsPerToken                                                atomic.Uint64 // float64 bits: of the last generation of 2 tokens or more

	bodies        budget // bytes of request bodies being read and checked
	maxTokenBytes int    // the longest token's bytes: text of n bytes is at least n/this positions

}

// New checks the options and makes a server (not yet listening).
func New(o Options) (*Server, error) {
	if o.Engine == nil || o.Tok == nil {
		return nil, errors.New("serve: an engine and a tokenizer are needed")
	}
	if err := o.Tok.CheckChat(); err != nil {
		return nil, err
	}
	if o.ModelID == "" {
		return nil, errors.New("serve: a model id is needed")
	}
	switch {
	case o.Queue == 0:
		o.Queue = 8
	case o.Queue < 0:
		o.Queue = 0
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.BodiesInFlight <= 0 {
		o.BodiesInFlight = 4 * o.MaxBodyBytes
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.DefaultMaxTokens <= 0 {
		o.DefaultMaxTokens = chat.DefaultMaxTokens
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 5 * time.Second
	}
	sess := chat.NewSession(o.Engine, o.Tok)
	sess.FitBudget(o.Fit)
	sess.Cache = o.PromptCache
	s := &Server{o: o, sess: sess, created: time.Now().Unix(), maxTokenBytes: 1}
	for id := range o.Tok.VocabSize() {
		s.maxTokenBytes = max(s.maxTokenBytes, len(o.Tok.TokenBytes(id)))
	}
	s.q.max = o.Queue
	s.base, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// CheckAddr refuses a listen address that is not loopback unless an API
// key is set: a server reachable from the network must ask for a key.
func CheckAddr(addr, apiKey string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v (want HOST:PORT, e.g. 127.0.0.1:8080)", addr, err)
	}
	if apiKey != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("address %q is reachable from other machines: give an API key (--api-key-file, $K3_API_KEY or --api-key) or listen on 127.0.0.1", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start listens on addr (checked with CheckAddr; port 0 picks one) and
// serves in the background until Stop.
func (s *Server) Start(addr string) error {
	if err := CheckAddr(addr, s.o.APIKey); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hs != nil {
		ln.Close()
		return errors.New("serve: already started")
	}
	s.ln = ln
	// No ReadTimeout: it would stay on the connection while a reply streams
	// and cancel the request when it passed; each body is read under its
	// own deadline instead (readBody), and writes have theirs.
	s.hs = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return s.base }}
	go func() { _ = s.hs.Serve(ln) }()
	s.logf("listening on http://%s (model %s, key %s)", ln.Addr(), s.o.ModelID, keyState(s.o.APIKey))
	return nil
}

func keyState(k string) string {
	if k == "" {
		return "not required"
	}
	return "required"
}

// Addr is the address the server listens on ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// BaseURL is the OpenAI base URL clients use (http://ADDR/v1).
func (s *Server) BaseURL() string { return "http://" + s.Addr() + "/v1" }

// Stop cancels running generations (they stop within one layer's work) and
// closes the server, waiting for responses to finish until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	s.cancel()
	s.mu.Lock()
	hs := s.hs
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}

// Stats reads the counters.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.requests.Load(), Generations: s.generations.Load(), Cancelled: s.cancelled.Load(),
		Reused: s.reused.Load(), Prefilled: s.prefilled.Load(), Tokens: s.tokens.Load()}
}

func (s *Server) logf(format string, args ...any) {
	if s.o.Log != nil {
		s.o.Log.Printf(format, args...)
	}
}

// Handler is the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.only("GET", s.health))
	mux.HandleFunc("/metrics", s.method("GET", s.authed(s.metrics))) // a scrape is not counted as a request
	mux.HandleFunc("/v1/models", s.only("GET", s.authed(s.models)))
	mux.HandleFunc("/v1/models/{id}", s.only("GET", s.authed(s.model)))
	mux.HandleFunc("/v1/chat/completions", s.only("POST", s.authed(s.chatCompletions)))
	mux.HandleFunc("/v1/completions", s.only("POST", s.authed(s.completions)))
	mux.HandleFunc("/v1/responses", s.only("POST", s.authed(s.responses)))
	mux.HandleFunc("/v1/messages", s.anthropicErrors(s.only("POST", s.authed(s.messages))))
	for _, p := range []string{"/tokenize", "/v1/tokenize"} {
		mux.HandleFunc(p, s.only("POST", s.authed(s.tokenize)))
	}
	for _, p := range []string{"/detokenize", "/v1/detokenize"} {
		mux.HandleFunc(p, s.only("POST", s.authed(s.detokenize)))
	}
	mux.HandleFunc("/v1/messages/count_tokens", s.anthropicErrors(s.only("POST", s.authed(s.countTokens))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, &openai.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path), Type: "invalid_request_error"})
	})
	return s.guard(s.cors(mux))
}

// guard refuses, when no API key is set, requests that a web page could
// send or read: a Host that is not a loopback name (what a DNS-rebinding
// page sends) and an Origin that --cors does not allow (a page's simple
// cross-origin POST, which needs no preflight).
func (s *Server) guard(h http.Handler) http.Handler {
	if s.o.APIKey != "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			host = hh
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		var why string
		switch origin := r.Header.Get("Origin"); {
		case !isLoopback(host):
			why = fmt.Sprintf("the Host %q is not a loopback name; without an API key this server answers only localhost, 127.0.0.1 or [::1]", r.Host)
		case origin != "" && !s.allowedOrigin(origin):
			why = fmt.Sprintf("requests from the web page at %q are refused: without an API key only the origins given to --cors may call this server", origin)
		}
		if why != "" {
			s.logf("%s %s 403: %s", r.Method, r.URL.Path, why)
			s.writeError(w, &openai.Error{Status: http.StatusForbidden, Message: why, Type: "invalid_request_error", Code: "forbidden"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// allowedOrigin says whether --cors allows origin ("*": any).
func (s *Server) allowedOrigin(origin string) bool {
	for _, o := range s.o.CORSOrigins {
		if o == "*" || o == origin {
			return true
		}
	}
	return false
}

// only answers other methods with 405 (and CORS preflights with 204) and
// counts the requests it lets through.
func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return s.method(method, func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	})
}

// method answers other methods than the one given with 405.
func (s *Server) method(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			w.Header().Set("Allow", method)
			s.writeError(w, &openai.Error{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method), Type: "invalid_request_error"})
			return
		}
		h(w, r)
	}
}

// authed checks the API key (constant-time) when one is set.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.o.APIKey != "" {
			got := r.Header.Get("x-api-key")
			if a := r.Header.Get("Authorization"); got == "" && len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
				got = strings.TrimSpace(a[7:])
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.o.APIKey)) != 1 {
				msg := "an API key is required: send Authorization: Bearer KEY or x-api-key: KEY"
				if got != "" {
					msg = "the API key is not correct"
				}
				s.logf("%s %s 401 (%s)", r.Method, r.URL.Path, map[bool]string{true: "wrong key", false: "no key"}[got != ""])
				s.writeError(w, &openai.Error{Status: http.StatusUnauthorized, Message: msg, Type: "invalid_request_error", Code: "invalid_api_key"})
				return
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
		h(w, r)
	}
}

// cors adds CORS headers for allowed origins and answers preflights.
func (s *Server) cors(h http.Handler) http.Handler {
	if len(s.o.CORSOrigins) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		allowed := ""
		for _, o := range s.o.CORSOrigins {
			if o == "*" || (origin != "" && o == origin) {
				allowed = o
				break
			}
		}
		if allowed != "" {
			hd := w.Header()
			hd.Set("Access-Control-Allow-Origin", allowed)
			// echo what the preflight asks for: the official SDKs send
			// their own headers (X-Stainless-*, anthropic-version, ...)
			if want := r.Header.Values("Access-Control-Request-Headers"); len(want) > 0 {
				hd.Set("Access-Control-Allow-Headers", strings.Join(want, ", "))
				hd.Add("Vary", "Access-Control-Request-Headers")
			} else {
				hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key")
			}
			hd.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			hd.Set("Access-Control-Expose-Headers", "X-K3-Reused-Positions, Retry-After")
			hd.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// writeJSON answers with v, the write under the write deadline.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	openai.WriteJSON(w, status, v)
}

// writeError answers with e, the write under the write deadline. A 429
// says when to try again: Retry-After, in seconds, one more than the
// requests waiting in the queue.
func (s *Server) writeError(w http.ResponseWriter, e *openai.Error) {
	if e.Status == http.StatusTooManyRequests {
		_, waiting := s.q.depth()
		w.Header().Set("Retry-After", strconv.Itoa(1+waiting))
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	openai.WriteError(w, e)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	running, waiting := s.q.depth()
	s.writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "model": s.o.ModelID, "generating": running, "queued": waiting})
}

func (s *Server) card() openai.Model {
	c := s.o.MaxContext
	return openai.Model{ID: s.o.ModelID, Object: "model", Created: s.created, OwnedBy: "k3",
		MaxModelLen: c, ContextLength: c, MaxInputTokens: c, MaxTokens: max(c-1, 0),
		Type: "model", DisplayName: s.o.ModelID, CreatedAt: time.Unix(s.created, 0).UTC().Format(time.RFC3339),
		K3: &openai.Capabilities{ContextLength: s.o.MaxContext, Thinking: true, Tools: true, StructuredOutput: true,
			Drafter: s.o.Engine.Model().DraftModel() != nil, Queue: s.o.Queue}}
}

// metrics answers GET /metrics: the counters in Prometheus' text format.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	running, waiting := s.q.depth()
	var b strings.Builder
	put := func(name, kind, help string, v any) {
		fmt.Fprintf(&b, "# HELP k3_%s %s\n# TYPE k3_%s %s\nk3_%s %v\n", name, help, name, kind, name, v)
	}
	put("requests_total", "counter", "Requests that reached an endpoint (scrapes of /metrics are not counted).", st.Requests)
	put("generations_total", "counter", "Generations that ran.", st.Generations)
	put("generations_cancelled_total", "counter", "Generations stopped because the client went away.", st.Cancelled)
	put("prompt_positions_reused_total", "counter", "Prompt positions reused from the kept engine state.", st.Reused)
	put("prompt_positions_prefilled_total", "counter", "Prompt positions read.", st.Prefilled)
	put("generated_tokens_total", "counter", "Reply tokens generated.", st.Tokens)
	put("generating", "gauge", "1 while a generation runs.", map[bool]int{true: 1}[running])
	put("queue_waiting", "gauge", "Requests waiting in the queue.", waiting)
	put("queue_size", "gauge", "Requests that may wait in the queue.", s.o.Queue)
	put("request_bodies_in_flight_bytes", "gauge", "Bytes of request bodies being read and checked.", s.bodies.inUse())
	if bits := s.secsPerToken.Load(); bits != 0 {
		put("last_generation_seconds_per_token", "gauge", "Seconds per reply token of the last generation, after its first token.",
			strconv.FormatFloat(math.Float64frombits(bits), 'g', -1, 64))
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	cards := []openai.Model{s.card()}
	for _, a := range s.o.ModelAliases {
		if a != "*" && a != s.o.ModelID {
			c := s.card()
			c.ID = a
			cards = append(cards, c)
		}
	}
	// OpenAI's list, with Anthropic's paging fields
	s.writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": cards,
		"has_more": false, "first_id": cards[0].ID, "last_id": cards[len(cards)-1].ID})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if err := s.checkModel(r.PathValue("id")); err != nil {
		s.writeError(w, err)
		return
	}
	s.writeJSON(w, http.StatusOK, s.card())
}

// checkModel accepts the served id (or none: curl users often leave it
// out) and the aliases.
func (s *Server) checkModel(id string) *openai.Error {
	if id == "" || id == s.o.ModelID || slices.Contains(s.o.ModelAliases, id) || slices.Contains(s.o.ModelAliases, "*") {
		return nil
	}
	return &openai.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("the model %q does not exist here; this server serves %q", id, s.o.ModelID),
		Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
}

// budget counts bytes in use against a cap, without waiting.
type budget struct {
	mu   sync.Mutex
	used int64
}

func (b *budget) take(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func tooLarge(limit int64) *openai.Error {
	return &openai.Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("the request body is larger than %d bytes", limit), Type: "invalid_request_error"}
}

// decode reads the whole request body, under the body deadline, and then
// decodes it as JSON into v, before the request takes a queue place. The
// body's bytes count against BodiesInFlight until release is called (when
// the request's checks are done); a body that would pass it is refused
// with 429 before it is read. A body that stops short of its length is
// refused with 408 and its connection closed.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) (release func(), _ *openai.Error) {
	rc := http.NewResponseController(w)
	n := r.ContentLength
	if n < 0 { // chunked: it may be up to the cap
		n = s.o.MaxBodyBytes
	}
	if n > s.o.MaxBodyBytes {
		// refused unread: net/http must not wait for the body before it answers
		_ = rc.SetReadDeadline(time.Now())
		return nil, tooLarge(s.o.MaxBodyBytes)
	}
	if !s.bodies.take(n, s.o.BodiesInFlight) {
		// read into nothing (no memory), so the client gets the answer
		// rather than a connection reset while it sends
		_ = rc.SetReadDeadline(time.Now().Add(s.o.BodyTimeout))
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			_ = rc.SetReadDeadline(time.Now())
		} else {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return nil, &openai.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "server_busy",
			Message: fmt.Sprintf("the server is busy reading other requests (%d MB of bodies at once); try again later", s.o.BodiesInFlight/1e6)}
	}
	release = sync.OnceFunc(func() { s.bodies.give(n) })
	_ = rc.SetReadDeadline(time.Now().Add(s.o.BodyTimeout))
	var buf bytes.Buffer
	buf.Grow(int(min(n, s.o.MaxBodyBytes)) + 1)
	_, err := buf.ReadFrom(r.Body)
	if err != nil {
		release()
		// the deadline stays passed: net/http does not wait for the rest
		_ = rc.SetReadDeadline(time.Now())
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge(mbe.Limit)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, &openai.Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error",
				Message: fmt.Sprintf("the request body did not arrive whole within %s (it stopped short of its length, or a chunked body lacked its last chunk)", s.o.BodyTimeout)}
		}
		return nil, openai.BadRequest("", "the request body could not be read whole: %v", err)
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err := json.Unmarshal(buf.Bytes(), v); err != nil {
		release()
		return nil, openai.BadRequest("", "the request body is not valid JSON for this endpoint: %v", err)
	}
	return release, nil
}
