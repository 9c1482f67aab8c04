package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"k3/ui/openai"
)

// POST /v1/responses: OpenAI's Responses API, stateless. The request's
// input items (messages, function calls and their outputs, reasoning) and
// instructions become a chat request (openai.ResponsesToChat); the reply comes back as output items
// (reasoning, message, function calls), streamed as the Responses events or
// not. Nothing is stored, so previous_response_id is refused.

// responseObject is the response (in progress while streaming: no usage).
func (s *Server) responseObject(id string, created int64, r *openai.ResponsesRequest, x *openai.ResponsesExtra, output []openai.OutputItem, res *result) *openai.Response {
	tools := r.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	choice := json.RawMessage(`"auto"`)
	if tc := bytes.TrimSpace(r.ToolChoice); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
		choice = tc
	}
	var reasoning openai.ReasoningConfig
	if r.Reasoning != nil && r.Reasoning.Effort != "" {
		reasoning.Effort = &r.Reasoning.Effort
	}
	if sum := r.Summary(); sum != "" {
		reasoning.Summary = &sum
	}
	format := json.RawMessage(`{"type":"text"}`)
	if r.Text != nil && len(bytes.TrimSpace(r.Text.Format)) > 0 && !bytes.Equal(bytes.TrimSpace(r.Text.Format), []byte("null")) {
		format = r.Text.Format
	}
	if output == nil {
		output = []openai.OutputItem{}
	}
	o := &openai.Response{ID: id, Object: "response", CreatedAt: created, Status: "in_progress", Model: s.o.ModelID,
		Output: output, Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, ParallelToolCalls: r.ParallelToolCalls == nil || *r.ParallelToolCalls,
		Reasoning: reasoning, Temperature: r.Temperature, TopP: r.TopP, Text: openai.TextConfig{Format: format},
		ToolChoice: choice, Tools: tools, Truncation: "disabled", Metadata: map[string]string{}}
	if res != nil {
		o.Status = "completed"
		if res.finish == "length" {
			o.Status, o.IncompleteDetails = "incomplete", &openai.IncompleteDetails{Reason: "max_output_tokens"}
		}
		done := time.Now().Unix()
		o.CompletedAt = &done
		o.Usage = openai.NewResponseUsage(res.prompt, len(res.ids), res.shown, res.reasoningTokens)
		o.Warnings = append(x.Warnings[:len(x.Warnings):len(x.Warnings)], res.warnings...)
	}
	return o
}

// responseOutput is a complete reply's output items: the thinking, the
// answer (also when empty, unless there are calls) and the calls.
func responseOutput(x *openai.ResponsesExtra, res *result, summarised bool, lp json.RawMessage) []openai.OutputItem {
	var out []openai.OutputItem
	if res.reasoning != "" {
		out = append(out, openai.NewReasoningItem(newID("rs_"), res.reasoning, summarised))
	}
	if res.content != "" || len(res.calls) == 0 {
		text := openai.NewOutputText(res.content)
		text.Logprobs = lp
		out = append(out, openai.NewMessageItem(newID("msg_"), "completed", text))
	}
	for _, c := range res.calls {
		out = append(out, x.FunctionCall(newID("fc_"), newID("call_"), c.Function.Name, c.Function.Arguments, "completed"))
	}
	return out
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	var rq openai.ResponsesRequest
	var q openai.ChatRequest
	x := &openai.ResponsesExtra{}
	j := &job{}
	id, created := newID("resp_"), time.Now().Unix()
	read := func() *openai.Error {
		chat, extra, err := openai.ResponsesToChat(&rq)
		if err != nil {
			return err
		}
		q, *x = chat, extra
		for _, w := range x.Warnings {
			s.logf("POST /v1/responses: %s", w)
		}
		return nil
	}
	s.handle(w, r, endpoint{name: "POST /v1/responses", body: &rq, j: j, checks: s.chatChecks(&q, j, read), stream: &q.Stream,
		streamed: func(ctx context.Context, cancel context.CancelFunc, p *place) (*result, error) {
			st := &responseStream{s: s, rq: &rq, x: x, id: id, created: created, summarised: rq.Summary() != ""}
			return st.run(ctx, cancel, w, p, j)
		},
		reply: func(res *result) any {
			return s.responseObject(id, created, &rq, x, responseOutput(x, res, rq.Summary() != "", s.replyLogprobs(res)), res)
		}})
}

// responseStream writes one response as the Responses events: every event
// numbered in order, each output item's events with its index.
type responseStream struct {
	s          *Server
	e          *openai.SSE
	rq         *openai.ResponsesRequest
	x          *openai.ResponsesExtra
	id         string
	created    int64
	summarised bool
	j          *job
	seq        int                 // the next event's sequence_number
	output     []openai.OutputItem // the items done so far
	itemID     string              // the open item's id
}

// next is the next sequence number.
func (st *responseStream) next() int {
	st.seq++
	return st.seq - 1
}

// send writes one event; typ is also its event name.
func (st *responseStream) send(typ string, ev any) { st.e.Event(typ, ev) }

// inProgress sends response.created or response.in_progress: the response
// before its output.
func (st *responseStream) inProgress(typ string) {
	st.send(typ, openai.ResponseEvent{Type: typ, SequenceNumber: st.next(), Response: st.s.responseObject(st.id, st.created, st.rq, st.x, nil, nil)})
}

func (st *responseStream) item(typ string, it openai.OutputItem) {
	st.send(typ, openai.OutputItemEvent{Type: typ, SequenceNumber: st.next(), OutputIndex: len(st.output), Item: it})
}

func (st *responseStream) part(typ string, part any) {
	st.send(typ, openai.ContentPartEvent{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Part: part})
}

func (st *responseStream) summaryPart(typ, text string) {
	st.send(typ, openai.SummaryPartEvent{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Part: openai.SummaryText(text)})
}

// open starts a reasoning or message item.
func (st *responseStream) open(kind string) {
	if kind == "reasoning" {
		st.itemID = newID("rs_")
		st.item("response.output_item.added", openai.NewReasoningItem(st.itemID, "", st.summarised))
		if st.summarised {
			st.summaryPart("response.reasoning_summary_part.added", "")
		}
		st.part("response.content_part.added", openai.ReasoningText(""))
		return
	}
	st.itemID = newID("msg_")
	st.item("response.output_item.added", openai.NewMessageItem(st.itemID, "in_progress"))
	st.part("response.content_part.added", openai.NewOutputText(""))
}

// delta sends a piece of the open item's text.
func (st *responseStream) delta(kind, d string) {
	ev := openai.TextDelta{Type: "response.output_text.delta", ItemID: st.itemID, OutputIndex: len(st.output), Delta: d, Logprobs: openai.EmptyList}
	if kind == "reasoning" {
		ev.Type, ev.Logprobs = "response.reasoning_text.delta", nil
	} else {
		ev.Logprobs = st.s.textLogprobs(st.j, false)
	}
	if kind == "reasoning" {
		if st.summarised {
			const typ = "response.reasoning_summary_text.delta"
			st.send(typ, openai.SummaryTextDelta{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Delta: d})
		}
	}
	ev.SequenceNumber = st.next()
	st.send(ev.Type, ev)
}

// close ends the open item with its whole text.
func (st *responseStream) close(kind, text string) {
	var item openai.OutputItem
	done := openai.TextDone{Type: "response.output_text.done", ItemID: st.itemID, OutputIndex: len(st.output), Text: text, Logprobs: openai.EmptyList}
	if kind == "reasoning" {
		if st.summarised {
			const typ = "response.reasoning_summary_text.done"
			st.send(typ, openai.SummaryTextDone{Type: typ, SequenceNumber: st.next(), ItemID: st.itemID, OutputIndex: len(st.output), Text: text})
			st.summaryPart("response.reasoning_summary_part.done", text)
		}
		done.Type, done.Logprobs = "response.reasoning_text.done", nil
		done.SequenceNumber = st.next()
		st.send(done.Type, done)
		st.part("response.content_part.done", openai.ReasoningText(text))
		item = openai.NewReasoningItem(st.itemID, text, st.summarised)
	} else {
		part := openai.NewOutputText(text)
		part.Logprobs = st.s.textLogprobs(st.j, true)
		done.SequenceNumber, done.Logprobs = st.next(), part.Logprobs
		st.send(done.Type, done)
		st.part("response.content_part.done", part)
		item = openai.NewMessageItem(st.itemID, "completed", part)
	}
	st.item("response.output_item.done", item)
	st.output = append(st.output, item)
}

// call sends one function call item with its arguments.
func (st *responseStream) call(name, args string) {
	fid := newID("fc_")
	item := st.x.FunctionCall(fid, newID("call_"), name, "", "in_progress")
	st.item("response.output_item.added", item)
	const delta, done = "response.function_call_arguments.delta", "response.function_call_arguments.done"
	st.send(delta, openai.ArgumentsDelta{Type: delta, SequenceNumber: st.next(), ItemID: fid, OutputIndex: len(st.output), Delta: args})
	st.send(done, openai.ArgumentsDone{Type: done, SequenceNumber: st.next(), ItemID: fid, OutputIndex: len(st.output), Name: name, Arguments: args})
	fin := st.x.FunctionCall(fid, item.CallID, name, args, "completed")
	st.item("response.output_item.done", fin)
	st.output = append(st.output, fin)
}

// run answers with the Responses events: response.created and
// response.in_progress, then per output item output_item.added, its
// content part and deltas as they are generated (reasoning_text,
// output_text; function call arguments when the reply is complete), the
// item's done events, and response.completed (or response.incomplete at
// the token cap) with the whole response. Every event has a
// sequence_number; SSE comments keep the connection alive meanwhile.
func (st *responseStream) run(ctx context.Context, cancel context.CancelFunc, w http.ResponseWriter, p *place, j *job) (*result, error) {
	s := st.s
	st.j = j
	st.e = openai.StartSSE(w, s.o.KeepAlive, s.o.WriteTimeout, func(error) { cancel() })
	defer st.e.Quiet()
	st.inProgress("response.created")
	if _, waiting := s.q.depth(); waiting > 0 {
		st.e.Comment(fmt.Sprintf("queued: %d waiting", waiting))
	}
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	st.inProgress("response.in_progress")
	b := &blocks{open: st.open, delta: st.delta, close: st.close}
	// response.in_progress again per keep-alive interval while a long
	// prompt is read, for agents' idle watchdogs
	hb := heartbeat{every: s.o.KeepAlive, last: time.Now()}
	res, err := b.generate(ctx, s, st.e, p, j, hb, func() { st.inProgress("response.in_progress") }, func(ae *openai.Error) {
		st.send("error", openai.ErrorEvent{Type: "error", SequenceNumber: st.next(), Code: ae.Code, Message: ae.Message, Param: ae.Param})
	})
	if err != nil {
		return nil, err
	}
	for _, c := range res.calls {
		st.call(c.Function.Name, c.Function.Arguments)
	}
	final := s.responseObject(st.id, st.created, st.rq, st.x, st.output, res)
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	st.send(typ, openai.ResponseEvent{Type: typ, SequenceNumber: st.next(), Response: final})
	return res, nil
}
