package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k3/ui/anthropic"
	"k3/ui/openai"
)

// POST /v1/messages: Anthropic's Messages API (what Claude Code speaks).
// The request becomes a chat request (anthropic.ToChat: system, the
// messages' blocks, tools, tool_choice, thinking and its effort). The reply is
// content blocks (thinking, text, tool_use), streamed as the Messages
// events or not; errors have Anthropic's shape. The key may come as
// x-api-key; anthropic-version and anthropic-beta are accepted and not
// read.

// usageOf counts the reuse this client may see (result.shown).
func usageOf(res *result) anthropic.Usage {
	return anthropic.Usage{InputTokens: res.prompt - res.shown, OutputTokens: len(res.ids), CacheReadInputTokens: res.shown}
}

// stopReason is the reply's stop_reason and stop_sequence.
func stopReason(res *result) (*string, *string) {
	return anthropic.StopReason(res.finish, len(res.calls), res.stopSeq)
}

// noLogprobs refuses logprobs and top_logprobs on /v1/messages: the
// Messages API has none (Anthropic answers a field it does not have with
// invalid_request_error), and a client that asks for them must not take
// a reply without them as having none to give.
func noLogprobs(m *anthropic.MessagesRequest) *openai.Error {
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"logprobs", m.Logprobs}, {"top_logprobs", m.TopLogprobs}} {
		if v := bytes.TrimSpace(f.v); len(v) > 0 && !bytes.Equal(v, []byte("null")) && !bytes.Equal(v, []byte("false")) {
			return openai.BadRequest(f.name, "%s: the Messages API has no log-probabilities; /v1/chat/completions, /v1/completions and /v1/responses give them", f.name)
		}
	}
	return nil
}

// readMessages reads a Messages request into the chat request q and its
// stop sequences into j.
func readMessages(m *anthropic.MessagesRequest, q *openai.ChatRequest, j *job) func() *openai.Error {
	return func() *openai.Error {
		if err := noLogprobs(m); err != nil {
			return err
		}
		chat, err := anthropic.ToChat(m)
		if err != nil {
			return err
		}
		*q = chat
		for _, st := range m.StopSequences {
			if st != "" {
				j.stops = append(j.stops, st)
			}
		}
		return nil
	}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var m anthropic.MessagesRequest
	var q openai.ChatRequest
	j := &job{}
	id := newID("msg_")
	s.handle(w, r, endpoint{name: "POST /v1/messages", body: &m, j: j, checks: s.chatChecks(&q, j, readMessages(&m, &q, j)), stream: &q.Stream,
		streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
			return s.streamMessage(ctx, cancel, w, p, j, id)
		},
		reply: func(res *result) any {
			out := anthropic.NewMessage(id, s.o.ModelID, usageOf(res))
			out.Warnings = res.warnings
			out.StopReason, out.StopSequence = stopReason(res)
			if res.reasoning != "" {
				out.Content = append(out.Content, anthropic.Thinking(res.reasoning))
			}
			if res.content != "" || len(res.calls) == 0 {
				out.Content = append(out.Content, anthropic.Text(res.content))
			}
			for _, c := range res.calls {
				out.Content = append(out.Content, anthropic.ToolUse(newID("toolu_"), c.Function.Name, anthropic.Input(c.Function.Arguments)))
			}
			return out
		}})
}

// countTokens answers POST /v1/messages/count_tokens: the positions the
// rendered prompt takes.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	var m anthropic.MessagesRequest
	release, err := s.decode(w, r, &m)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer release()
	if m.MaxTokens == nil {
		m.MaxTokens = new(int) // not part of this request
		*m.MaxTokens = 1
	}
	var q openai.ChatRequest
	j := &job{}
	checks := s.chatChecks(&q, j, readMessages(&m, &q, j))
	for _, check := range checks[:len(checks)-1] { // no fit: no reply
		if err := check(); err != nil {
			s.writeError(w, err)
			return
		}
	}
	release()
	s.writeJSON(w, http.StatusOK, anthropic.TokenCount{InputTokens: len(j.ids)})
}

// streamMessage answers with the Messages events: message_start (and a
// ping), then per content block content_block_start, its deltas as they
// are generated (thinking_delta, text_delta; input_json_delta when the
// reply is complete) and content_block_stop, then message_delta with the
// stop reason and usage, and message_stop.
func (s *Server) streamMessage(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job, id string) (*result, error) {
	e := openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer e.Quiet()
	ping := func() { e.Event("ping", anthropic.Event{Type: "ping"}) }
	e.Event("message_start", anthropic.MessageStart{Type: "message_start", Message: anthropic.NewMessage(id, s.o.ModelID, anthropic.Usage{InputTokens: len(j.ids)})})
	ping()
	if _, waiting := s.q.depth(); waiting > 0 {
		e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	index := -1
	start := func(block anthropic.Block) {
		index++
		e.Event("content_block_start", anthropic.BlockStart{Type: "content_block_start", Index: index, ContentBlock: block})
	}
	delta := func(d any) {
		e.Event("content_block_delta", anthropic.BlockDelta{Type: "content_block_delta", Index: index, Delta: d})
	}
	stop := func() { e.Event("content_block_stop", anthropic.BlockStop{Type: "content_block_stop", Index: index}) }
	b := &blocks{
		open: func(kind string) {
			if kind == "reasoning" {
				start(anthropic.Thinking(""))
			} else {
				start(anthropic.Text(""))
			}
		},
		delta: func(kind, d string) {
			if kind == "reasoning" {
				delta(anthropic.ThinkingDelta{Type: "thinking_delta", Thinking: d})
			} else {
				delta(anthropic.TextDelta{Type: "text_delta", Text: d})
			}
		},
		close: func(kind, text string) { stop() },
	}
	// a ping event when the prompt's reading starts and per keep-alive
	// interval after, for agents' idle watchdogs
	res, err := b.generate(ctx, s, e, p, j, heartbeat{every: s.o.KeepAlive}, ping, func(ae *openai.Error) {
		e.Event("error", anthropic.NewError(ae.Status, ae.Message))
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		start(anthropic.ToolUse(newID("toolu_"), c.Function.Name, json.RawMessage("{}")))
		delta(anthropic.InputJSONDelta{Type: "input_json_delta", PartialJSON: string(anthropic.Input(c.Function.Arguments))})
		stop()
	}
	md := anthropic.MessageDelta{Type: "message_delta", Usage: usageOf(res), Warnings: res.warnings}
	md.Delta.StopReason, md.Delta.StopSequence = stopReason(res)
	e.Event("message_delta", md)
	e.Event("message_stop", anthropic.Event{Type: "message_stop"})
	return res, nil
}

// anthropicErrors rewrites the error answers of h (OpenAI's shape, as
// writeError writes them) into Anthropic's: {"type": "error", "error":
// {"type", "message"}}, with the same status and headers.
func (s *Server) anthropicErrors(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		aw := &anthropicWriter{ResponseWriter: w}
		h(aw, r)
		if aw.status == 0 {
			return
		}
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(aw.body.String())
		if json.Unmarshal(aw.body.Bytes(), &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		w.Header().Del("Content-Length")
		s.writeJSON(w, aw.status, anthropic.NewError(aw.status, msg))
	}
}

// anthropicWriter holds back an error answer (status 400 and up) for
// anthropicErrors; everything else passes through.
type anthropicWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (a *anthropicWriter) WriteHeader(code int) {
	if code >= 400 {
		a.status = code
		return
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *anthropicWriter) Write(b []byte) (int, error) {
	if a.status != 0 {
		return a.body.Write(b)
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the stream.
func (a *anthropicWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
