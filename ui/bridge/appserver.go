package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/plan"
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
	// what `k3 serve` accepts by default; the plan, made for the app's
	// conversations, grows with the requests that need it (growContext)
	s, err := serve.New(serve.Options{Engine: e, Tok: tok, ModelID: id, APIKey: key, MaxContext: max(serve.DefaultContext, opened.Positions),
		Lock: &serveLock{c: c}, Grow: c.growContext, Fit: opened, PromptCache: pc})
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

// growContext is the app's server's serve.Options.Grow: a request that
// may take the context past the positions the plan reserved grows the
// plan by plan.ContextStep positions at a time, as `k3 chat` grows a
// conversation's, its KV cache checked against the memory available now
// (plan.Grow); one that cannot fit is refused naming the limit. The
// server calls it under its Lock (c.mu).
func (c *engineChat) growContext(need int) error {
	if c.m == nil {
		return errors.New("the model was closed")
	}
	read := c.readMemory
	if read == nil {
		read = doctor.ReadMemory
	}
	var memp *plan.Memory
	if mem, err := read(); err == nil {
		memp = &mem
	}
	g, err := plan.Grow(c.m.Cfg, c.m.Bound, c.opened.StateCopies, c.planned, need, memp)
	if err != nil {
		return err
	}
	c.planned = g.Need
	return nil
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

// ServeWatcher is a chat engine whose server the window can follow (G13:
// while k3 serve answered a request the window showed nothing).
type ServeWatcher interface {
	// WatchServer sends on what the server does: an EventPhase when a
	// request begins (AnsweringPhase) and ends (""), the engine's
	// counters (EventStats) while it runs. on runs on the server's
	// goroutines; nil stops watching.
	WatchServer(on func(engine.Event))
	// ServedRequests is how many requests the server answered or is
	// answering.
	ServedRequests() int64
}

// AnsweringPhase is the status while the app's server answers its n-th
// request.
func AnsweringPhase(n int64) string {
	return fmt.Sprintf("answering a request from another program (request %d)", n)
}

// WatchServer: ServeWatcher.
func (c *engineChat) WatchServer(on func(engine.Event)) {
	if on == nil {
		c.serveWatch.Store(nil)
		return
	}
	c.serveWatch.Store(&on)
}

// ServedRequests: ServeWatcher.
func (c *engineChat) ServedRequests() int64 { return c.served.Load() }

func (c *engineChat) watcher() func(engine.Event) {
	if on := c.serveWatch.Load(); on != nil {
		return *on
	}
	return func(engine.Event) {}
}

// serveLock is the lock the app's server holds around each generation:
// the chat's own, so the two take turns on the engine, and while it is
// held the window hears of the request and the engine's counters.
type serveLock struct {
	c    *engineChat
	stop func()
}

func (l *serveLock) Lock() {
	l.c.mu.Lock()
	n := l.c.served.Add(1)
	on := l.c.watcher()
	phase(on, AnsweringPhase(n))
	if l.c.e != nil {
		on(engine.Event{Kind: engine.EventStats, Stats: l.c.e.Snapshot(), At: time.Now()})
		l.stop = pollStats(l.c.e, on)
	}
}

func (l *serveLock) Unlock() {
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
	on := l.c.watcher()
	if l.c.e != nil {
		on(engine.Event{Kind: engine.EventStats, Stats: l.c.e.Snapshot(), At: time.Now()})
	}
	phase(on, "")
	l.c.mu.Unlock()
}
