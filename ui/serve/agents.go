package serve

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k3/ui/openai"
)

// What POST /v1/responses (responses.go) and POST /v1/messages
// (messages.go) share. Both read their request into the chat request of
// /v1/chat/completions and run it through the same checks, queue, session
// and generation (Server.handle, Server.generate); only the wire format
// differs.

// blocks turns the generation's reasoning and answer deltas into a
// sequence of blocks of one kind each ("reasoning" or "text"): a delta of
// another kind closes the open block and opens a new one.
type blocks struct {
	kind  string
	text  strings.Builder
	texts int // text blocks opened so far
	open  func(kind string)
	delta func(kind, s string)
	close func(kind, text string)
}

func (b *blocks) add(kind, s string) {
	if s == "" {
		return
	}
	if b.kind != kind {
		b.end()
		b.kind = kind
		if kind == "text" {
			b.texts++
		}
		b.open(kind)
	}
	b.text.WriteString(s)
	b.delta(kind, s)
}

// end closes the open block, if any.
func (b *blocks) end() {
	if b.kind != "" {
		b.close(b.kind, b.text.String())
		b.kind = ""
		b.text.Reset()
	}
}

// finish closes the open block; when no text block was sent and the reply
// has no tool calls, it sends an empty one (as the non-streamed reply has).
func (b *blocks) finish(calls int) {
	b.end()
	if b.texts == 0 && calls == 0 {
		b.texts++
		b.open("text")
		b.close("text", "")
	}
}

// generate runs the job of a streamed agent reply into b: an SSE comment
// per step of the prompt's reading and, paced by hb, an event from beat
// for agents' idle watchdogs; the reasoning and answer as blocks; the
// place left when done. A failure not caused by the client leaving is
// sent with fail; the blocks are finished for the reply's calls.
func (b *blocks) generate(ctx context.Context, s *Server, e *openai.SSE, p *place, j *job, hb heartbeat, beat func(), fail func(*openai.Error)) (*result, error) {
	j.onPrefill = func(done, total int) {
		e.Comment(fmt.Sprintf("prefill %d/%d", done, total))
		if hb.due(time.Now()) {
			beat()
		}
	}
	j.onReasoning = func(t string) { b.add("reasoning", t) }
	j.onAnswer = func(t string) { b.add("text", t) }
	res, err := s.generateAt(ctx, p, j, fail)
	if err != nil {
		return nil, err
	}
	b.finish(len(res.calls))
	return res, nil
}

// heartbeat paces the events a stream sends while a long prompt is read,
// for clients that watch for idle streams by events, not SSE comments
// (Codex CLI's stream_idle_timeout_ms is 5 minutes by default).
type heartbeat struct {
	every time.Duration
	last  time.Time
}

// due says whether an event should go out at now (and counts it sent).
func (h *heartbeat) due(now time.Time) bool {
	if now.Sub(h.last) < h.every {
		return false
	}
	h.last = now
	return true
}
