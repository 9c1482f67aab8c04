package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sse writes a server-sent event stream: `data: JSON` events, `: text`
// comments (which clients ignore and proxies count as traffic) and the
// final `data: [DONE]`. Writes come from the handler and the keep-alive
// ticker, so they are serialized.
type sse struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	rc   *http.ResponseController
	last time.Time
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// startSSE sends the stream's headers and starts a keep-alive comment every
// interval without other writes.
func startSSE(w http.ResponseWriter, every time.Duration) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: http.NewResponseController(w), stop: make(chan struct{})}
	e.flushLocked()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(every / 2)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case now := <-t.C:
				e.mu.Lock()
				if now.Sub(e.last) >= every {
					e.writeLocked(": keep-alive\n\n")
				}
				e.mu.Unlock()
			}
		}
	}()
	return e
}

func (e *sse) flushLocked() {
	_ = e.rc.Flush()
	e.last = time.Now()
}

func (e *sse) writeLocked(s string) {
	_, _ = e.w.Write([]byte(s))
	e.flushLocked()
}

// comment sends `: text` (one line).
func (e *sse) comment(text string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked(": " + strings.ReplaceAll(text, "\n", " ") + "\n\n")
}

// data sends one event with v as JSON.
func (e *sse) data(v any) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked("data: " + string(b) + "\n\n")
}

// quiet stops the keep-alives (again: nothing).
func (e *sse) quiet() {
	e.once.Do(func() { close(e.stop); e.wg.Wait() })
}

// done stops the keep-alives and sends [DONE].
func (e *sse) done() {
	e.quiet()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked("data: [DONE]\n\n")
}
