package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Assistant is a parsed assistant turn.
type Assistant struct {
	Reasoning string // think channel ("" without one)
	Content   string // response channel
	ToolCalls []ToolCall
	// Complete is true when the turn was closed (<|close|>message<|sep|>)
	// and ended by <|end_of_msg|> or [EOS].
	Complete bool
}

// Message returns the turn as an assistant history message.
func (a Assistant) Message() Message {
	return Message{Role: "assistant", Content: a.Content, ReasoningContent: a.Reasoning, ToolCalls: a.ToolCalls}
}

// ChannelOpen is the last tag of a generation prompt: the model's output
// continues it. Prepend it to generated text before ParseAssistant.
func ChannelOpen(thinking bool) string {
	if thinking {
		return Open + "think" + Sep
	}
	return Open + "response" + Sep
}

// item is a control token or a run of text.
type item struct {
	ctl  string // control token name, "" for text
	text string
}

var parseControls = []string{Open, Close, Sep, EndOfMsg, EOS}

// ParseAssistant parses an assistant message body from text: optionally
// `<|open|>message role="assistant"<|sep|>`, then an optional think channel,
// the response channel, optional tool calls, and optionally
// `<|close|>message<|sep|>` followed by <|end_of_msg|> or [EOS]. For
// generated text, prepend ChannelOpen(thinking). In text, the strings of
// the control tokens are taken as control tokens; use ParseAssistantIDs
// on ids to tell generated control tokens from text that spells them.
func ParseAssistant(text string) (Assistant, error) {
	return parseItems(textItems(text))
}

// ParseAssistantIDs parses generated ids (the tokens after the generation
// prompt; thinking says which channel the prompt opened). Only special ids
// act as control tokens; any special id other than the chat controls is an
// error.
func (t *Tokenizer) ParseAssistantIDs(ids []int, thinking bool) (Assistant, error) {
	items := []item{{ctl: Open}, {text: "think"}, {ctl: Sep}}
	if !thinking {
		items[1].text = "response"
	}
	var txt []int
	flush := func() {
		if len(txt) > 0 {
			items = append(items, item{text: string(t.Decode(txt))})
			txt = txt[:0]
		}
	}
	for _, id := range ids {
		if id < 0 || id >= t.VocabSize() {
			return Assistant{}, fmt.Errorf("id %d outside the vocabulary", id)
		}
		if !t.IsSpecial(id) {
			txt = append(txt, id)
			continue
		}
		name := t.SpecialName(id)
		ok := false
		for _, c := range parseControls {
			ok = ok || c == name
		}
		if !ok {
			return Assistant{}, fmt.Errorf("unexpected special token %s (%d) in an assistant turn", name, id)
		}
		flush()
		items = append(items, item{ctl: name})
	}
	flush()
	return parseItems(items)
}

type itemParser struct {
	items []item
	i     int
	// warn, when set, hears about values that had to be read loosely
	// (a typed argument that is not JSON, a json block that is not JSON).
	warn func(string)
}

func (p *itemParser) warnf(format string, args ...any) {
	if p.warn != nil {
		p.warn(fmt.Sprintf(format, args...))
	}
}

func (p *itemParser) peekCtl(c string) bool { return p.i < len(p.items) && p.items[p.i].ctl == c }

// tag reads <|open|>TAG ATTRS<|sep|> (or <|close|>TAG<|sep|>) and returns
// the text between the two controls.
func (p *itemParser) tag(ctl string) (string, bool) {
	if !p.peekCtl(ctl) {
		return "", false
	}
	j := p.i + 1
	var b strings.Builder
	for j < len(p.items) && p.items[j].ctl == "" {
		b.WriteString(p.items[j].text)
		j++
	}
	if j >= len(p.items) || p.items[j].ctl != Sep {
		return "", false
	}
	p.i = j + 1
	return b.String(), true
}

func (p *itemParser) expect(ctl, want string) error {
	save := p.i
	got, ok := p.tag(ctl)
	if !ok || got != want {
		p.i = save
		return fmt.Errorf("expected %s%s%s", ctl, want, Sep)
	}
	return nil
}

// textUntil reads text up to the next control token.
func (p *itemParser) textUntil() string {
	var b strings.Builder
	for p.i < len(p.items) && p.items[p.i].ctl == "" {
		b.WriteString(p.items[p.i].text)
		p.i++
	}
	return b.String()
}

func (p *itemParser) tryTag(ctl, want string) bool {
	save := p.i
	if got, ok := p.tag(ctl); ok && got == want {
		return true
	}
	p.i = save
	return false
}

func parseItems(items []item) (Assistant, error) {
	p := &itemParser{items: items}
	var a Assistant
	save := p.i
	if got, ok := p.tag(Open); !ok || !strings.HasPrefix(got, "message") {
		p.i = save
	}
	if p.tryTag(Open, "think") {
		a.Reasoning = p.textUntil()
		if err := p.expect(Close, "think"); err != nil {
			return a, fmt.Errorf("think channel: %v", err)
		}
	}
	if err := p.expect(Open, "response"); err != nil {
		return a, fmt.Errorf("assistant turn: %v", err)
	}
	a.Content = p.textUntil()
	if err := p.expect(Close, "response"); err != nil {
		return a, fmt.Errorf("response channel: %v", err)
	}
	if p.tryTag(Open, "tools") {
		calls, err := p.toolCalls()
		if err != nil {
			return a, err
		}
		a.ToolCalls = calls
	}
	if p.i == len(p.items) {
		return a, nil
	}
	if err := p.expect(Close, "message"); err != nil {
		return a, fmt.Errorf("after the response: %v", err)
	}
	if p.i == len(p.items) {
		return a, nil
	}
	if p.peekCtl(EndOfMsg) || p.peekCtl(EOS) {
		p.i++
		a.Complete = true
	}
	if p.i != len(p.items) {
		return a, errors.New("unexpected output after the end of the assistant turn")
	}
	return a, nil
}

func (p *itemParser) call(n int) (ToolCall, error) {
	head, ok := p.tag(Open)
	name, attrs, err := parseTagAttrs(head)
	if !ok || err != nil || name != "call" {
		return ToolCall{}, fmt.Errorf("tool call %d: expected %scall tool=\"...\"%s", n, Open, Sep)
	}
	if attrs["tool"] == "" {
		return ToolCall{}, fmt.Errorf("tool call %d has no tool name", n)
	}
	tc := ToolCall{Type: "function", Function: FunctionCall{Name: attrs["tool"]}}
	var args strings.Builder
	nargs := 0
	for !p.tryTag(Close, "call") {
		head, ok := p.tag(Open)
		tag, attrs, err := parseTagAttrs(head)
		if !ok || err != nil {
			return tc, fmt.Errorf("tool call %d: expected an argument tag", n)
		}
		value := p.textUntil()
		if err := p.expect(Close, tag); err != nil {
			return tc, fmt.Errorf("tool call %d: %v", n, err)
		}
		switch tag {
		case "json":
			if !json.Valid([]byte(value)) {
				p.warnf("tool call %d (%s): its json block is not valid JSON; the arguments are its text as written", n, tc.Function.Name)
			}
			tc.Function.Arguments = value
			continue
		case "argument":
		default:
			return tc, fmt.Errorf("tool call %d: unexpected tag %q", n, tag)
		}
		if nargs == 0 {
			args.WriteByte('{')
		} else {
			args.WriteString(", ")
		}
		nargs++
		var kb strings.Builder
		writePyString(&kb, attrs["key"])
		args.WriteString(kb.String())
		args.WriteString(": ")
		typ := attrs["type"]
		raw := strings.TrimSpace(value)
		if typ != "string" && !json.Valid([]byte(raw)) {
			p.warnf("tool call %d (%s): argument %q of type %q is not JSON; it is passed as a string", n, tc.Function.Name, attrs["key"], typ)
		}
		if typ == "string" || !json.Valid([]byte(raw)) {
			var vb strings.Builder
			writePyString(&vb, value)
			args.WriteString(vb.String())
		} else {
			args.WriteString(raw)
		}
	}
	if nargs > 0 {
		args.WriteByte('}')
		tc.Function.Arguments = args.String()
	} else if tc.Function.Arguments == "" {
		tc.Function.Arguments = "{}"
	}
	return tc, nil
}

// parseTagAttrs splits `tag k="v" k2="v2"` (values &amp;/&quot; escaped).
func parseTagAttrs(s string) (string, map[string]string, error) {
	name, rest, _ := strings.Cut(s, " ")
	attrs := map[string]string{}
	for rest != "" {
		k, after, ok := strings.Cut(rest, `="`)
		if !ok || k == "" || strings.ContainsAny(k, " \"") {
			return name, attrs, errors.New("bad attribute")
		}
		v, after2, ok := strings.Cut(after, `"`)
		if !ok {
			return name, attrs, errors.New("unterminated attribute")
		}
		attrs[k] = strings.ReplaceAll(strings.ReplaceAll(v, "&quot;", `"`), "&amp;", "&")
		rest = strings.TrimPrefix(after2, " ")
	}
	return name, attrs, nil
}
