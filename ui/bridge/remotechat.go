package bridge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/remote"
	"k3/ui/serve"
)

// Where the model runs (Settings.Backend).
const (
	BackendLocal  = ""       // the engine on this machine
	BackendServer = "server" // an OpenAI-compatible server (Settings.ServerURL)
)

// CanChat reports whether the settings name something to chat with: a
// model folder, or a server.
func (s Settings) CanChat() bool {
	if s.Backend == BackendServer {
		return s.ServerURL != ""
	}
	return s.ModelDir != ""
}

// NewChatFor returns the chat engine the settings ask for.
func NewChatFor(s Settings) (ChatEngine, error) {
	if s.Backend == BackendServer {
		return NewRemoteChat(s)
	}
	return NewEngineChat(s), nil
}

// remoteChat is the app's chat engine on a server: the conversation is
// sent whole each turn (the server keeps its own state).
type remoteChat struct {
	c    *remote.Client
	info ModelInfo
}

// NewRemoteChat returns a chat engine on the server the settings name.
func NewRemoteChat(s Settings) (ChatEngine, error) {
	c, err := remote.New(s.ServerURL, s.ServerKey, s.ServerModel)
	if err != nil {
		return nil, err
	}
	return &remoteChat{c: c}, nil
}

func (r *remoteChat) Open(ctx context.Context, on func(engine.Event)) (ModelInfo, error) {
	if r.info.Name != "" {
		return r.info, nil
	}
	phase(on, "asking the server which models it serves")
	id, err := r.c.Resolve(ctx)
	if err != nil {
		return ModelInfo{}, serverErr(r.c.BaseURL, err)
	}
	host := r.c.BaseURL
	if u, err := url.Parse(r.c.BaseURL); err == nil {
		host = u.Host
	}
	r.info = ModelInfo{Name: id + " on " + host, Remote: true, Plan: "runs on the server at " + r.c.BaseURL + ": this machine's memory gauges do not apply"}
	phase(on, "ready")
	return r.info, nil
}

func (r *remoteChat) Turn(ctx context.Context, history []chat.Message, opt chat.Options, on func(engine.Event)) (Reply, error) {
	if _, err := r.Open(ctx, on); err != nil {
		return Reply{}, err
	}
	if len(history) == 0 || history[len(history)-1].Role != "user" {
		return Reply{}, errors.New("the conversation must end with your message")
	}
	res, err := r.c.Turn(ctx, history, opt, on)
	err = serverErr(r.c.BaseURL, err)
	if res == nil {
		return Reply{}, err
	}
	if err == nil && res.Message.Cut != chat.CutStopped {
		done := fmt.Sprintf("the server wrote %d deltas", res.Deltas)
		if res.Usage != nil {
			done = fmt.Sprintf("the server wrote %d tokens", res.Usage.CompletionTokens)
		}
		if res.TokensPerSecond > 0 {
			done += fmt.Sprintf(", %.1f tokens/s after %.2f s", res.TokensPerSecond, res.FirstTokenSeconds)
		}
		phase(on, done)
	}
	return Reply{Message: res.Message}, err
}

func (r *remoteChat) Close() {}

// DefaultServeAddr is where the app's server listens unless told otherwise.
const DefaultServeAddr = "127.0.0.1:8080"

// Server is a chat engine that can serve its model over HTTP: the local
// engine (`k3 serve` run by the app over its loaded model).
type Server interface {
	StartServer(ctx context.Context, addr, key string, on func(engine.Event)) (string, error)
	StopServer()
	ServerURL() string
}

// appServer is `k3 serve` run by the app over its loaded model.
type appServer struct {
	s    *serve.Server
	addr string
}

// StartServer serves the loaded model over HTTP at addr (key required
// when addr is not loopback). The server and the app's chat take turns on
// the engine: a generation of one waits for the other's to finish.
func (c *engineChat) StartServer(ctx context.Context, addr, key string, on func(engine.Event)) (string, error) {
	if srv := c.srv.Load(); srv != nil {
		return srv.s.BaseURL(), nil
	}
	if err := serve.CheckAddr(addr, key); err != nil {
		return "", err
	}
	if _, err := c.Open(ctx, on); err != nil {
		return "", err
	}
	c.mu.Lock()
	e, tok, info, opened := c.e, c.tok, c.info, c.opened
	c.mu.Unlock()
	if e == nil {
		return "", errors.New("the model was closed")
	}
	id := filepath.Base(c.s.ModelDir)
	if info.Demo {
		id = "k3-demo"
	}
	s, err := serve.New(serve.Options{Engine: e, Tok: tok, ModelID: id, APIKey: key, MaxContext: ContextPositions, Lock: &c.mu,
		Fit: opened})
	if err != nil {
		return "", err
	}
	if err := s.Start(addr); err != nil {
		return "", err
	}
	if !c.srv.CompareAndSwap(nil, &appServer{s: s, addr: addr}) {
		_ = s.Stop(context.Background())
		return "", errors.New("a server was started at the same time")
	}
	return s.BaseURL(), nil
}

// StopServer stops the app's server (generations in flight end within one
// layer's work); nothing when none runs. Call it without holding c.mu.
func (c *engineChat) StopServer() {
	srv := c.srv.Swap(nil)
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.s.Stop(ctx)
}

// ServerURL is the running server's base URL ("" when none runs).
func (c *engineChat) ServerURL() string {
	if srv := c.srv.Load(); srv != nil {
		return srv.s.BaseURL()
	}
	return ""
}
