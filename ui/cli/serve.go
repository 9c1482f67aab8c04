package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k3/ui/serve"
)

func init() {
	register("serve", "an OpenAI-compatible HTTP server for the model (chat with tool calls, completions)", cmdServe)
}

// serveSignals arranges for c to receive the signals that stop the server
// (tests replace it).
var serveSignals = func(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }

// serveUsage is k3 serve -h's text above the flags.
var serveUsage = []string{"usage: k3 serve MODEL_DIR [--addr 127.0.0.1:8080] [--api-key-file PATH] [memory flags as k3 run]",
	"Serves GET /v1/models, POST /v1/chat/completions, POST /v1/completions, POST /v1/responses (OpenAI Responses, stateless),",
	"POST /v1/messages (Anthropic Messages) and GET /health.",
	"Ctrl-C (or SIGTERM) stops it: generations in flight end within one layer's work."}

func cmdServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	mf := addModelFlags(fs, "serve")
	tokDir := fs.String("tok", "", "tokenizer directory (default: the model directory)")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address; one that is not loopback needs --api-key")
	apiKey := fs.String("api-key", "", "require this key (Authorization: Bearer KEY or x-api-key); every local user can read it with ps: prefer --api-key-file or $K3_API_KEY")
	apiKeyFile := fs.String("api-key-file", "", "require the key in this file (its first line); default $K3_API_KEY")
	modelID := fs.String("model-id", "", "the model id clients name (default: the model folder's name)")
	queue := fs.Int("queue", 8, "requests that may wait while one generates; more get 429")
	ctxLen := fs.Int("context", serve.DefaultContext, "positions per request, prompt and reply (the memory plan reserves them)")
	maxTokens := fs.Int("max-tokens", 4096, "reply cap when a request gives none")
	bodyMB := fs.Float64("max-body-mb", 8, "largest request body in MB")
	cors := fs.String("cors", "", "comma-separated browser origins allowed to call the server (\"*\": any); default none")
	keepAlive := fs.Duration("keep-alive", 5*time.Second, "SSE comment interval while a streamed request waits")
	bodyTimeout := fs.Duration("body-timeout", 30*time.Second, "how long a request body may take to arrive whole; one that stops short gets 408")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "how long one write to a client may block; a client that stops reading is cut off")
	quiet := fs.Bool("quiet", false, "no request log")
	cf := addCacheFlags(fs)
	shared := fs.Bool("prompt-cache-shared", false, "one prompt-cache partition for every client (default: one per API key and prompt_cache_key); clients can then tell from the timing what others sent")
	var aliases []string
	fs.Func("model-alias", "also serve requests naming NAME (repeatable; NAME=ID says which model, which must be this one; \"*\": any name), for agents with fixed model names", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("give a model name")
		}
		aliases = append(aliases, v)
		return nil
	})
	setUsage(fs, stderr, serveUsage...)
	pos, code := parseN(fs, args, 1, stderr, "k3 serve: give exactly one MODEL_DIR (run 'k3 serve -h' for the flags)")
	if code >= 0 {
		return code
	}
	if code := mf.resolve(fs, stdout, stderr); code >= 0 {
		return code
	}
	key, err := serveAccess(*apiKey, *apiKeyFile, *addr, serveLimitsOK(*queue, *ctxLen, *maxTokens, *bodyMB, *keepAlive, *bodyTimeout, *writeTimeout))
	if err != nil {
		fmt.Fprintf(stderr, "k3 serve: %v\n", err)
		return ExitUsage
	}
	dir := pos[0]
	tok, code := chatTokenizer("serve", dir, *tokDir, stderr)
	if code >= 0 {
		return code
	}
	id := serveModelID(*modelID, dir)
	names, err := modelAliases(aliases, id)
	if err != nil {
		fmt.Fprintf(stderr, "k3 serve: %v\n", err)
		return ExitUsage
	}
	e, eo, closeModel, code := mf.openChat(dir, *ctxLen, tok, stdout, stderr)
	if code >= 0 {
		return code
	}
	defer closeModel()
	pc, err := cf.open("serve", e.Model(), eo, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "k3 serve: --prompt-cache: %v\n", err)
		return ExitUsage
	}
	o := serve.Options{Engine: e, Tok: tok, ModelID: id, ModelAliases: names, APIKey: key, Queue: *queue, MaxBodyBytes: int64(*bodyMB * 1e6),
		CORSOrigins: corsOrigins(*cors), MaxContext: *ctxLen, DefaultMaxTokens: *maxTokens, KeepAlive: *keepAlive, Fit: eo,
		BodyTimeout: *bodyTimeout, WriteTimeout: *writeTimeout, SharedCache: *shared}
	if pc != nil {
		o.PromptCache = pc
	}
	if !*quiet {
		o.Log = log.New(stderr, "", log.LstdFlags)
	}
	if *queue == 0 {
		o.Queue = -1 // none may wait
	}
	s, err := serve.New(o)
	if err != nil {
		fmt.Fprintf(stderr, "k3 serve: %v\n", err)
		return ExitUsage
	}
	return runServer(s, *addr, id, key != "", stdout, stderr)
}

// runServer serves until Ctrl-C or SIGTERM, stops the server (generations
// in flight end within one layer's work) and reports what it served.
func runServer(s *serve.Server, addr, id string, keyed bool, stdout, stderr io.Writer) int {
	sig := make(chan os.Signal, 1)
	serveSignals(sig)
	defer signal.Stop(sig)
	if err := s.Start(addr); err != nil {
		fmt.Fprintf(stderr, "k3 serve: %v\n", err)
		return ExitRuntime
	}
	fmt.Fprintf(stdout, "serving %s at %s (OpenAI base URL; API key %s)\n", id, s.BaseURL(), map[bool]string{true: "required", false: "not required"}[keyed])
	<-sig
	fmt.Fprintln(stdout, "stopping: generations in flight end within one layer's work")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		fmt.Fprintf(stderr, "k3 serve: stop: %v\n", err)
		return ExitRuntime
	}
	st := s.Stats()
	fmt.Fprintf(stdout, "stopped after %d requests, %d generations (%d cancelled); %d prompt positions reused, %d read\n",
		st.Requests, st.Generations, st.Cancelled, st.Reused, st.Prefilled)
	return ExitOK
}

// serveAccess is the API key (serveKey), once the limits are right
// (limitsOK) and the address may be served with that key (serve.CheckAddr),
// in that order.
func serveAccess(apiKey, apiKeyFile, addr string, limitsOK bool) (string, error) {
	key, err := serveKey(apiKey, apiKeyFile)
	if err != nil {
		return "", err
	}
	if !limitsOK {
		return "", errors.New("--queue must be >= 0, --context >= 2, --max-tokens >= 1, --max-body-mb above 0 and at most 1024, --keep-alive, --body-timeout and --write-timeout at least 1ms")
	}
	if err := serve.CheckAddr(addr, key); err != nil {
		return "", err
	}
	return key, nil
}

// corsOrigins reads --cors: comma-separated origins, blanks left out.
func corsOrigins(list string) []string {
	var origins []string
	for _, o := range strings.Split(list, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	return origins
}

// serveLimitsOK checks k3 serve's limits: a queue of 0 or more, a
// context of 2 positions or more, a reply cap of 1 or more, a body limit
// in (0, 1024] MB, timeouts of at least a millisecond.
func serveLimitsOK(queue, ctxLen, maxTokens int, bodyMB float64, keepAlive, bodyTimeout, writeTimeout time.Duration) bool {
	return queue >= 0 && ctxLen >= 2 && maxTokens >= 1 && bodyMB > 0 && bodyMB <= 1024 &&
		keepAlive >= time.Millisecond && bodyTimeout >= time.Millisecond && writeTimeout >= time.Millisecond
}

// serveModelID is the model id clients name: --model-id, or the model
// folder's name.
func serveModelID(given, dir string) string {
	if given != "" {
		return given
	}
	abs, _ := filepath.Abs(dir)
	return filepath.Base(abs)
}

// serveKey is the API key from --api-key-file (its first line), --api-key
// or $K3_API_KEY, in that order ("" for none). A key with spaces or
// control characters, which no client could send back, is refused.
func serveKey(flagKey, file string) (string, error) {
	key, from := flagKey, "--api-key"
	switch {
	case file != "" && flagKey != "":
		return "", errors.New("give the key once: --api-key-file or --api-key")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %v", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		key, from = strings.TrimSpace(line), "the key in "+file
		if key == "" {
			return "", fmt.Errorf("%s is empty", from)
		}
	case flagKey == "":
		key, from = os.Getenv("K3_API_KEY"), "$K3_API_KEY"
	}
	if strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "", fmt.Errorf("%s holds a space or a control character; no client could send it", from)
	}
	return key, nil
}

// modelAliases reads --model-alias values: NAME, or NAME=ID where ID is
// the served model's id.
func modelAliases(vals []string, id string) ([]string, error) {
	var out []string
	for _, v := range vals {
		name, target, ok := strings.Cut(v, "=")
		name = strings.TrimSpace(name)
		if ok && strings.TrimSpace(target) != id {
			return nil, fmt.Errorf("--model-alias %s: this server serves only %q", v, id)
		}
		if name == "" {
			return nil, fmt.Errorf("--model-alias %q: give a model name", v)
		}
		out = append(out, name)
	}
	return out, nil
}
