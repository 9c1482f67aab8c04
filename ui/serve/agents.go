package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k3/tokenizer/xtml"
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

// chatTool is a tool declaration in the chat format the renderer reads.
func chatTool(name, description string, parameters json.RawMessage, strict *bool) (json.RawMessage, error) {
	if name == "" {
		return nil, fmt.Errorf("a tool has no name")
	}
	f := map[string]any{"name": name}
	if description != "" {
		f["description"] = description
	}
	if p := bytes.TrimSpace(parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		f["parameters"] = json.RawMessage(p)
	}
	if strict != nil && *strict { // held strictly (constrain.ToolSchemas); false is the default
		f["strict"] = true
	}
	return json.Marshal(map[string]any{"type": "function", "function": f})
}

// namedChoice is a chat tool_choice naming one function.
func namedChoice(name string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
	return b
}

// textOf reads a string, or an array of parts of the given types each with
// a "text", into one string.
func textOf(raw json.RawMessage, types ...string) (string, error) {
	return joinText(raw, "", types...)
}

// textPartsOf is an array content's parts (textOf checked their types), each
// rendered as its own segment as Moonshot's encoder does; nil for a string.
func textPartsOf(raw json.RawMessage) []openai.ContentPart {
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	out := make([]openai.ContentPart, len(parts))
	for i, p := range parts {
		out[i] = openai.ContentPart{Text: p.Text}
	}
	return out
}

// joinText is textOf with sep between the parts.
func joinText(raw json.RawMessage, sep string, types ...string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("must be a string or an array of %s parts", strings.Join(types, "/"))
	}
	var b strings.Builder
	for i, p := range parts {
		ok := false
		for _, t := range types {
			ok = ok || p.Type == t
		}
		if !ok || p.Text == nil {
			return "", fmt.Errorf("part %d is of type %q: only %s parts are supported", i, p.Type, strings.Join(types, "/"))
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// msg is a chat request message with text content.
func msg(role, text string) openai.Message {
	return openai.Message{Role: role, Content: openai.Content(text)}
}

// toolCall is a call of the conversation's history.
func toolCall(id, name, args string) xtml.ToolCall {
	return xtml.ToolCall{ID: id, Type: "function", Function: xtml.FunctionCall{Name: name, Arguments: args}}
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
