package tokenizer

import (
	"fmt"
	"strings"
)

// Reply is a generated assistant turn read for an API client. Unlike
// ParseAssistant it never fails: output that does not follow the chat
// format (a tool call cut off by the token cap, a stray tag, text after
// the end of the turn) is kept as answer text and named in Warnings, so a
// server can always answer with what the model wrote.
type Reply struct {
	Reasoning string // think channel
	Content   string // response channel, plus any output that could not be read as structure
	ToolCalls []ToolCall
	// Warnings say what was read loosely or returned as text.
	Warnings []string
	// Complete is true when the turn was closed and ended by <|end_of_msg|> or [EOS].
	Complete bool
}

// ParseReply reads generated text (what follows the generation prompt,
// whose last tag thinking names) in which the strings of the control tokens
// are control tokens. Use ParseReplyIDs on ids.
func ParseReply(generated string, thinking bool) Reply {
	items := []item{{ctl: Open}, {text: channelName(thinking)}, {ctl: Sep}}
	return parseReplyItems(append(items, textItems(generated)...))
}

// ParseReplyIDs reads generated ids (the tokens after the generation
// prompt). Only special ids act as control tokens, so argument text that
// spells "<|open|>" stays text. A special id that is not a chat control is
// kept in the text by name, with a warning.
func (t *Tokenizer) ParseReplyIDs(ids []int, thinking bool) Reply {
	items := []item{{ctl: Open}, {text: channelName(thinking)}, {ctl: Sep}}
	var txt []int
	var warns []string
	flush := func() {
		if len(txt) > 0 {
			items = append(items, item{text: string(t.Decode(txt))})
			txt = txt[:0]
		}
	}
	for _, id := range ids {
		if id < 0 || id >= t.VocabSize() {
			flush()
			warns = append(warns, fmt.Sprintf("id %d is outside the vocabulary; it was left out", id))
			continue
		}
		if !t.IsSpecial(id) {
			txt = append(txt, id)
			continue
		}
		name := t.SpecialName(id)
		if !isControl(name) {
			flush()
			items = append(items, item{text: name})
			warns = append(warns, fmt.Sprintf("unexpected special token %s in the reply; kept as text", name))
			continue
		}
		flush()
		items = append(items, item{ctl: name})
	}
	flush()
	r := parseReplyItems(items)
	r.Warnings = append(warns, r.Warnings...)
	return r
}

// ParseToolCalls reads one tools section as the model writes it,
// `<|open|>tools<|sep|>` then `<|open|>call tool="NAME" index="N"<|sep|>`
// blocks of typed arguments, then `<|close|>tools<|sep|>`, into OpenAI tool
// calls (arguments as JSON text; no ids). Nothing may follow the section.
func ParseToolCalls(section string) ([]ToolCall, error) {
	p := &itemParser{items: textItems(section)}
	if !p.tryTag(Open, "tools") {
		return nil, fmt.Errorf("expected %stools%s", Open, Sep)
	}
	calls, err := p.toolCalls()
	if err != nil {
		return calls, err
	}
	if p.i != len(p.items) {
		return calls, fmt.Errorf("unexpected output after %stools%s", Close, Sep)
	}
	return calls, nil
}

func channelName(thinking bool) string {
	if thinking {
		return "think"
	}
	return "response"
}

func isControl(name string) bool {
	for _, c := range parseControls {
		if c == name {
			return true
		}
	}
	return false
}

// textItems splits text at the control-token strings.
func textItems(text string) []item {
	var items []item
	for len(text) > 0 {
		at, which := -1, ""
		for _, c := range parseControls {
			if i := strings.Index(text, c); i >= 0 && (at < 0 || i < at) {
				at, which = i, c
			}
		}
		if at < 0 {
			items = append(items, item{text: text})
			break
		}
		if at > 0 {
			items = append(items, item{text: text[:at]})
		}
		items = append(items, item{ctl: which})
		text = text[at+len(which):]
	}
	return items
}

// spell writes items back as text (controls by name).
func spell(items []item) string {
	var b strings.Builder
	for _, it := range items {
		if it.ctl != "" {
			b.WriteString(it.ctl)
		} else {
			b.WriteString(it.text)
		}
	}
	return b.String()
}

// toolCalls reads calls up to and including <|close|>tools<|sep|>.
func (p *itemParser) toolCalls() ([]ToolCall, error) {
	var calls []ToolCall
	for !p.tryTag(Close, "tools") {
		if p.i >= len(p.items) {
			return calls, fmt.Errorf("the tools section ends before %stools%s (cut off?)", Close, Sep)
		}
		tc, err := p.call(len(calls) + 1)
		if err != nil {
			return calls, err
		}
		calls = append(calls, tc)
	}
	return calls, nil
}

// parseReplyItems reads a turn leniently: think channel, response channel,
// tools section, end of the message; whatever breaks the structure from
// there on is answer text.
func parseReplyItems(items []item) Reply {
	var r Reply
	p := &itemParser{items: items, warn: func(w string) { r.Warnings = append(r.Warnings, w) }}
	asText := func(from int, why string) Reply {
		if rest := spell(p.items[from:]); rest != "" {
			r.Content += rest
			r.Warnings = append(r.Warnings, why+"; the rest of the output is returned as text")
		}
		r.Complete = false
		return r
	}
	if p.tryTag(Open, "think") {
		r.Reasoning = p.textUntil()
		if p.i == len(p.items) {
			return r // cut off while thinking
		}
		if err := p.expect(Close, "think"); err != nil {
			// everything after a broken think channel is still thinking
			r.Reasoning += spell(p.items[p.i:])
			r.Warnings = append(r.Warnings, "the think channel was not closed as the chat format says; the rest of the output is kept as reasoning")
			return r
		}
	}
	if p.i == len(p.items) {
		return r
	}
	if err := p.expect(Open, "response"); err != nil {
		return asText(p.i, "no response channel where one was expected")
	}
	r.Content = p.textUntil()
	if p.i == len(p.items) {
		return r // cut off while answering
	}
	if err := p.expect(Close, "response"); err != nil {
		return asText(p.i, "the response channel was not closed as the chat format says")
	}
	if at, nw := p.i, len(r.Warnings); p.tryTag(Open, "tools") {
		calls, err := p.toolCalls()
		if err != nil {
			r.Warnings = r.Warnings[:nw]
			return asText(at, fmt.Sprintf("the tool calls could not be read (%v)", err))
		}
		r.ToolCalls = calls
	}
	if p.i == len(p.items) {
		return r
	}
	if err := p.expect(Close, "message"); err != nil {
		return asText(p.i, "unexpected output after the response")
	}
	if p.peekCtl(EndOfMsg) || p.peekCtl(EOS) {
		p.i++
		r.Complete = true
	}
	if p.i != len(p.items) {
		return asText(p.i, "unexpected output after the end of the turn")
	}
	return r
}
