package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SSE is a server-sent event stream being written: `data: JSON` events,
// `: text` comments (which clients ignore and proxies count as traffic)
// and the final `data: [DONE]`. Writes come from the handler and the
// keep-alive ticker, so they are serialized. Every write has a deadline:
// a client that stops reading fails the stream (Err) instead of blocking
// the writer, and the stream's broken func is told once.
type SSE struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	broken  func(error)
	err     error
	last    time.Time
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// minTick is the shortest keep-alive check interval.
const minTick = time.Millisecond

// StartSSE sends the stream's headers and starts a keep-alive comment every
// keepAlive without other writes. Each write must finish within
// writeTimeout (0: no deadline); the first write that fails calls broken
// (nil: nothing) and ends the stream.
func StartSSE(w http.ResponseWriter, keepAlive, writeTimeout time.Duration, broken func(error)) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	e := &SSE{w: w, rc: http.NewResponseController(w), timeout: writeTimeout, broken: broken, stop: make(chan struct{})}
	e.mu.Lock()
	e.deadlineLocked()
	w.WriteHeader(http.StatusOK)
	e.flushLocked()
	e.mu.Unlock()
	if keepAlive <= 0 {
		return e
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(max(keepAlive/2, minTick))
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case now := <-t.C:
				e.mu.Lock()
				if now.Sub(e.last) >= keepAlive {
					e.writeLocked(": keep-alive\n\n")
				}
				e.mu.Unlock()
			}
		}
	}()
	return e
}

func (e *SSE) deadlineLocked() {
	if e.timeout > 0 {
		_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
	}
}

func (e *SSE) failLocked(err error) {
	if err == nil || e.err != nil {
		return
	}
	e.err = err
	if e.broken != nil {
		e.broken(err)
	}
}

func (e *SSE) flushLocked() {
	if e.err == nil {
		if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			e.failLocked(err)
		}
	}
	e.last = time.Now()
}

func (e *SSE) writeLocked(s string) {
	if e.err != nil {
		return
	}
	e.deadlineLocked()
	if _, err := io.WriteString(e.w, s); err != nil {
		e.failLocked(err)
		return
	}
	e.flushLocked()
}

// Err is the error of the first write that failed (nil while all went out).
func (e *SSE) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Comment sends `: text` (one line).
func (e *SSE) Comment(text string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked(": " + strings.ReplaceAll(text, "\n", " ") + "\n\n")
}

// Data sends one event with v as JSON.
func (e *SSE) Data(v any) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked("data: " + string(b) + "\n\n")
}

// Event sends one named event (`event: name` then `data: JSON`), the
// framing of OpenAI's Responses API and Anthropic's Messages API.
func (e *SSE) Event(name string, v any) {
	b, _ := json.Marshal(v)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked("event: " + name + "\ndata: " + string(b) + "\n\n")
}

// Quiet stops the keep-alives (again: nothing).
func (e *SSE) Quiet() {
	e.once.Do(func() { close(e.stop); e.wg.Wait() })
}

// Done stops the keep-alives and sends [DONE].
func (e *SSE) Done() {
	e.Quiet()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writeLocked("data: [DONE]\n\n")
}

// Event is one thing read from a stream: a comment line, or an event's
// data (its data: lines joined by newlines) and type (event:, "" for the
// default "message").
type Event struct {
	Comment string
	Data    []byte
	Type    string
}

// MaxLine is the longest line ReadSSE accepts.
const MaxLine = 4 << 20

// ErrLineTooLong is returned when a line of the stream passes MaxLine.
var ErrLineTooLong = fmt.Errorf("a line of the event stream is longer than %d MiB", MaxLine>>20)

// ReadSSE reads a server-sent event stream as the SSE standard says: one
// leading UTF-8 BOM is ignored; lines end in CRLF, LF or CR; a line
// starting with ':' is a comment (given to fn at once); data: lines are
// joined and an empty line ends the event; id: and retry: are ignored.
// Data left at the end of the stream is given as a last event. It returns
// fn's first error, ErrLineTooLong, the read error, or nil at the end.
func ReadSSE(r io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	sc.Split(scanLines)
	var data bytes.Buffer
	var typ string
	has, first := false, true
	dispatch := func() error {
		if !has {
			typ = ""
			return nil
		}
		ev := Event{Data: append([]byte{}, data.Bytes()...), Type: typ} // never nil: nil is a comment
		data.Reset()
		has, typ = false, ""
		return fn(ev)
	}
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line, first = bytes.TrimPrefix(line, []byte("\ufeff")), false
		}
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		if line[0] == ':' {
			if err := fn(Event{Comment: strings.TrimSpace(string(line[1:]))}); err != nil {
				return err
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if has {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > MaxLine {
				return ErrLineTooLong
			}
			data.Write(value)
			has = true
		case "event":
			typ = string(value)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return ErrLineTooLong
		}
		return err
	}
	return dispatch()
}

// scanLines splits at CRLF, LF or CR (a CR at the end of the buffer waits
// for the next byte, which may be its LF).
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
