package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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
	lock := &serveLock{c: c}
	s, err := serve.New(serve.Options{Engine: e, Tok: tok, ModelID: id, APIKey: key, MaxContext: max(serve.DefaultContext, opened.Positions),
		Lock: lock, Observe: lock.event, Grow: c.growContext, Fit: opened, PromptCache: pc})
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
	c.info.BudgetBytes += g.More
	c.planBytes.Store(c.info.BudgetBytes)
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
	// request begins (AnsweringPhase), as its prompt is read, from before
	// its first pass (ServedReadingPhase), and when it ends (""); while
	// it runs, the engine's counters (EventStats), the
	// prompt's progress (EventPrefill) and each token with its step time
	// (EventToken), as a turn of the app's sends them (not the reply's
	// text: it is the other program's). on runs on the server's
	// goroutines, one event at a time, while the request holds the
	// engine; nil stops watching.
	WatchServer(on func(engine.Event))
	// ServedRequests is how many requests the server answered or is
	// answering.
	ServedRequests() int64
	// Answering reports whether a request holds the engine now: a turn
	// started now waits for it (WaitingForServer).
	Answering() bool
	// PlanBytes is the memory plan's total now (ModelInfo.BudgetBytes,
	// grown by the KV cache of the longer requests; 0: not known).
	PlanBytes() int64
}

// AnsweringPhase is the status while the app's server answers its n-th
// request.
func AnsweringPhase(n int64) string {
	return fmt.Sprintf("answering a request from another program (request %d)", n)
}

// ServedReadingPhase is the status while the app's server reads the
// prompt of its n-th request: reading, the line a turn of the app's shows
// (PrefillETA.Phase, or the tower's progress on a picture).
func ServedReadingPhase(n int64, reading string) string {
	return fmt.Sprintf("request %d from another program: %s", n, reading)
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

// Answering: ServeWatcher.
func (c *engineChat) Answering() bool { return c.answering.Load() }

// PlanBytes: ServeWatcher.
func (c *engineChat) PlanBytes() int64 { return c.planBytes.Load() }

func (c *engineChat) watcher() func(engine.Event) {
	if on := c.serveWatch.Load(); on != nil {
		return *on
	}
	return func(engine.Event) {}
}

// serveLock is the lock the app's server holds around each generation:
// the chat's own, so the two take turns on the engine, and while it is
// held the window hears of the request and the engine's counters.
// The fields below the mutex are the request's holding it.
type serveLock struct {
	c *engineChat

	stop func()
	// on sends to the watcher one event at a time (the poller's and the
	// generation's)
	on    func(engine.Event)
	n     int64
	eta   PrefillETA
	phase string
}

func (l *serveLock) Lock() {
	l.c.mu.Lock()
	l.c.answering.Store(true)
	l.n = l.c.served.Add(1)
	watch := l.c.watcher()
	var onMu sync.Mutex
	l.on = func(ev engine.Event) {
		onMu.Lock()
		defer onMu.Unlock()
		watch(ev)
	}
	l.eta.Begin()
	l.setPhase(AnsweringPhase(l.n))
	if l.c.e != nil {
		l.on(engine.Event{Kind: engine.EventStats, Stats: l.c.e.Snapshot(), At: time.Now()})
		l.stop = pollStats(l.c.e, l.on)
	}
}

// event is serve.Options.Observe: the generation's events the window
// follows (ServeWatcher.WatchServer), the prompt's reading in the status
// from the request's start (the session's first event, chat.Opening, says
// what it will take, as the app's own turn does), the vision tower's
// progress on a request's pictures.
func (l *serveLock) event(ev engine.Event) {
	reading, ok := l.eta.Event(ev)
	switch ev.Kind {
	case engine.EventPrefill:
		p := AnsweringPhase(l.n)
		if ok && ev.Done < ev.Total { // not read yet: say where it is
			p = ServedReadingPhase(l.n, reading)
		}
		l.setPhase(p)
	case engine.EventPhase: // the tower looking at a picture (chat.PictureEvent)
		if ev.Text != "" {
			l.setPhase(ServedReadingPhase(l.n, ev.Text))
		}
		return
	case engine.EventToken, engine.EventStats:
	default:
		return // the reply's text is the other program's
	}
	l.on(ev)
}

func (l *serveLock) setPhase(p string) {
	if p != l.phase {
		l.phase = p
		phase(l.on, p)
	}
}

func (l *serveLock) Unlock() {
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
	if l.c.e != nil {
		l.on(engine.Event{Kind: engine.EventStats, Stats: l.c.e.Snapshot(), At: time.Now()})
	}
	l.setPhase("")
	l.c.answering.Store(false)
	l.c.mu.Unlock()
}
