package bridge

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"k3/engine"
	"k3/ui/serve"
)

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
	e, tok, info, opened, pc := c.e, c.tok, c.info, c.opened, c.cache
	c.mu.Unlock()
	if e == nil {
		return "", errors.New("the model was closed")
	}
	id := filepath.Base(c.s.ModelDir)
	if info.Demo {
		id = "k3-demo"
	}
	s, err := serve.New(serve.Options{Engine: e, Tok: tok, ModelID: id, APIKey: key, MaxContext: ContextPositions, Lock: &c.mu,
		Fit: opened, PromptCache: pc})
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
