package xtml

import (
	"encoding/json"
	"errors"
	"fmt"
	"k3/tokenizer"
	"strings"
)

// The one reader of a generated assistant turn. It takes the ids the model
// writes after the generation prompt one at a time and says, as they come,
// what they are: reasoning text, answer text, a tool call begun or
// finished, or a warning about output it had to read loosely. The chat
// session streams its events, the server answers from them (streamed or
// not: the same events), and the history keeps its Reply.
//
// Its rules, agreed with the Kimi K3 parsers of vLLM, SGLang and LightLLM
// where they agree (docs/replies.md lists the cases):
//   - markup is never text: control tokens and the tags between them never
//     reach Reasoning or Content, and a tag cut off at the end of the
//     output (`deep thought<|close|>`) is left out;
//   - a tools section is read wherever it opens (straight after the prompt,
//     inside the think or response channel); a section cut off keeps its
//     complete calls and leaves out the unfinished one;
//   - each piece of text goes to one field only, so the same text is never
//     in both Reasoning and Content;
//   - with ReplyOptions.NoTools, tool calls are read but left out;
//   - whatever was read loosely is named in Warnings.

// ReplyOptions say how the turn was prompted.
type ReplyOptions struct {
	// Thinking: the generation prompt opened the think channel (else the
	// response channel).
	Thinking bool
	// NoTools: the request declared no tools or set tool_choice "none";
	// tool calls the model writes anyway are left out, with a warning
	// (vLLM and SGLang drop them too). NoToolsWhy says why, for it.
	NoTools    bool
	NoToolsWhy string
}

// Reply is a generated assistant turn as the reader read it.
type Reply struct {
	Reasoning string // think channel
	Content   string // response channel (and answer text written outside any channel)
	ToolCalls []ToolCall
	// Warnings say what was read loosely or left out; a turn written
	// exactly as the chat format says has none.
	Warnings []string
	// Complete is true when the turn was ended by <|end_of_msg|> or [EOS].
	Complete bool
	// ReasoningTokens counts the text ids of the think channel.
	ReasoningTokens int
}

// Err is nil for a turn written exactly as the chat format says, else an
// error naming the first warning.
func (r Reply) Err() error {
	if len(r.Warnings) == 0 {
		return nil
	}
	return errors.New(r.Warnings[0])
}

// Message returns the turn as an assistant history message.
func (r Reply) Message() Message {
	return Message{Role: "assistant", Content: r.Content, ReasoningContent: r.Reasoning, ToolCalls: r.ToolCalls}
}

// ReplyEventKind says what a ReplyEvent reports.
type ReplyEventKind uint8

// Reply event kinds.
const (
	ReplyReasoning ReplyEventKind = iota // Text is more of the think channel
	ReplyContent                         // Text is more of the answer
	ReplyToolStart                       // a tool call began: Index, Call.Function.Name (a call left out later gets a warning, not a ToolEnd)
	ReplyToolEnd                         // a tool call is complete: Index, Call (name and arguments)
	ReplyWarning                         // Text says what was read loosely or left out
)

var replyEventNames = [...]string{"reasoning", "content", "tool_start", "tool_end", "warning"}

func (k ReplyEventKind) String() string {
	if int(k) < len(replyEventNames) {
		return replyEventNames[k]
	}
	return "event?"
}

// ReplyEvent is one step of a reply as the reader reads it.
type ReplyEvent struct {
	Kind  ReplyEventKind
	Text  string
	Index int      // tool events: the call's index in Reply.ToolCalls
	Call  ToolCall // tool events
}

type replyMode uint8

const (
	inThink       replyMode = iota
	inAnswer                // the response channel
	afterThink              // the think channel closed, no response channel yet
	afterResponse           // the response channel closed
	inTools                 // between calls
	inCall                  // between arguments
	inArg                   // an argument or json block's value
	afterTools              // the tools section closed
	afterMessage            // <|close|>message<|sep|>
	ended                   // <|end_of_msg|> or [EOS]
)

// ReplyReader reads one generated turn (NewReplyReader).
type ReplyReader struct {
	t    *tokenizer.Tokenizer
	o    ReplyOptions
	dec  *tokenizer.StreamDecoder
	mode replyMode

	tagOpen bool   // a tag is being read: after <|open|> or <|close|>, before <|sep|>
	tagIsOp bool   // ... and it opens
	tag     []byte // its text so far

	stray     strings.Builder // whitespace written outside a channel, held back
	call      *callBuilder
	left      int // tool calls read but left out (NoTools)
	warned    map[string]bool
	rep       Reply // the calls, warnings and counts so far
	reasoning strings.Builder
	answer    strings.Builder
	out       []ReplyEvent
	finished  bool
	strayText bool // answer text outside the response channel was warned about
}

// NewReplyReader starts reading a turn, as ids of t, generated after a
// prompt rendered with o.
func NewReplyReader(t *tokenizer.Tokenizer, o ReplyOptions) *ReplyReader {
	r := &ReplyReader{t: t, o: o, dec: t.NewStreamDecoder(), mode: inAnswer, warned: map[string]bool{}}
	if o.Thinking {
		r.mode = inThink
	}
	return r
}

// ReadReply reads a whole generated turn, as ids of t.
func ReadReply(t *tokenizer.Tokenizer, ids []int, o ReplyOptions) Reply {
	r := NewReplyReader(t, o)
	for _, id := range ids {
		r.Add(id)
	}
	r.Finish()
	return r.Reply()
}

// Reply is what was read so far (after Finish: the whole turn).
func (r *ReplyReader) Reply() Reply {
	rep := r.rep
	rep.Reasoning, rep.Content = r.reasoning.String(), r.answer.String()
	rep.ToolCalls = append([]ToolCall(nil), r.rep.ToolCalls...)
	rep.Warnings = append([]string(nil), r.rep.Warnings...)
	return rep
}

// Add reads one generated id and returns the events it completes.
func (r *ReplyReader) Add(id int) []ReplyEvent {
	r.out = nil
	switch {
	case r.finished:
	case id < 0 || id >= r.t.VocabSize():
		r.warn(fmt.Sprintf("id %d is outside the vocabulary; it was left out", id))
	case !r.t.IsSpecial(id):
		if r.tagOpen {
			r.tag = append(r.tag, r.t.TokenBytes(id)...)
			break
		}
		if r.mode == inThink {
			r.rep.ReasoningTokens++
		}
		r.text(r.dec.Add(id))
	default:
		r.control(r.t.SpecialName(id))
	}
	return r.out
}

// Finish ends the turn (the output stopped: a stop token, the token cap,
// a stop string or the client) and returns the events that completes.
func (r *ReplyReader) Finish() []ReplyEvent {
	r.out = nil
	if r.finished {
		return nil
	}
	if r.tagOpen {
		r.tagOpen = false
		r.warn("the output ends inside a tag (cut off?); the unfinished tag was left out")
	}
	r.text(r.dec.Flush())
	r.endTools("the output ends")
	r.finished = true
	if r.left > 0 {
		why := r.o.NoToolsWhy
		if why == "" {
			why = "tool calls were not asked for"
		}
		r.warn(fmt.Sprintf("the model wrote %d tool call(s) but %s; they were left out", r.left, why))
	}
	return r.out
}

func (r *ReplyReader) emit(ev ReplyEvent) { r.out = append(r.out, ev) }

func (r *ReplyReader) warn(w string) {
	if r.warned[w] {
		return
	}
	r.warned[w] = true
	r.rep.Warnings = append(r.rep.Warnings, w)
	r.emit(ReplyEvent{Kind: ReplyWarning, Text: w})
}

// text routes decoded text to the current place.
func (r *ReplyReader) text(s string) {
	if s == "" {
		return
	}
	switch r.mode {
	case inThink:
		r.reasoning.WriteString(s)
		r.emit(ReplyEvent{Kind: ReplyReasoning, Text: s})
	case inAnswer:
		r.content(s)
	case afterThink, afterResponse, afterTools, afterMessage:
		if strings.TrimSpace(s) == "" {
			r.stray.WriteString(s)
			return
		}
		if !r.strayText {
			r.strayText = true
			r.warn("answer text outside the response channel was read as answer text")
		}
		s = r.stray.String() + s
		r.stray.Reset()
		r.content(s)
	case inArg:
		r.call.val.WriteString(s)
	case inTools, inCall:
		if strings.TrimSpace(s) != "" {
			r.warn("text between tool calls was left out")
		}
	case ended:
		r.warn("output after the end of the turn was left out")
	}
}

func (r *ReplyReader) content(s string) {
	r.answer.WriteString(s)
	r.emit(ReplyEvent{Kind: ReplyContent, Text: s})
}

// control reads a control token.
func (r *ReplyReader) control(name string) {
	r.text(r.dec.Flush())
	r.stray.Reset()
	switch name {
	case tokenizer.Open, tokenizer.Close:
		if r.tagOpen {
			// a tag ended by another tag instead of <|sep|>
			// (`thought<|close|>think<|open|>response<|sep|>`)
			r.warn(fmt.Sprintf("a tag %q was not ended by %s; it was read as if it were", strings.TrimSpace(string(r.tag)), tokenizer.Sep))
			r.endTag()
		}
		if r.mode == ended {
			r.text(name)
			return
		}
		r.tagOpen, r.tagIsOp, r.tag = true, name == tokenizer.Open, r.tag[:0]
	case tokenizer.Sep:
		if !r.tagOpen {
			r.warn(fmt.Sprintf("a stray %s was left out", tokenizer.Sep))
			return
		}
		r.endTag()
	case tokenizer.EndOfMsg, tokenizer.EOS:
		if r.tagOpen {
			r.tagOpen = false
			r.warn("the turn ends inside a tag; the unfinished tag was left out")
		}
		if r.mode == ended {
			r.text(name)
			return
		}
		if r.mode != afterMessage {
			r.warn("the turn ended without closing the message")
		}
		r.endTools("the turn ends")
		r.mode = ended
		r.rep.Complete = true
	default:
		r.warn(fmt.Sprintf("unexpected special token %s in the reply; it was left out", name))
	}
}

// endTools closes a tools section the output left open.
func (r *ReplyReader) endTools(why string) {
	switch r.mode {
	case inCall, inArg:
		r.warn(why + " inside a tool call; the unfinished call was left out")
		r.call = nil
		r.mode = afterTools
	case inTools:
		r.warn(why + " inside the tools section; its complete calls were kept")
		r.mode = afterTools
	}
}

// endTag applies the tag just read.
func (r *ReplyReader) endTag() {
	r.tagOpen = false
	head := strings.TrimSpace(string(r.tag))
	name, attrs, err := parseTagAttrs(head)
	if r.tagIsOp {
		r.open(name, head, attrs, err)
	} else {
		r.close(name)
	}
}

func (r *ReplyReader) inToolsSection() bool {
	return r.mode == inTools || r.mode == inCall || r.mode == inArg
}

func (r *ReplyReader) open(name, head string, attrs map[string]string, attrErr error) {
	switch name {
	case "think":
		r.openThink()
	case "response":
		r.openResponse()
	case "tools":
		r.openTools()
	case "call":
		r.openCall(head, attrs, attrErr)
	case "argument", "json":
		r.openArgument(name, head, attrs, attrErr)
	case "message":
		r.warn("a message tag inside the reply was left out")
	default:
		if r.inToolsSection() {
			r.badInCall(fmt.Sprintf("the tag %q", head))
			return
		}
		r.unexpected(head)
	}
}

// loose warns of a tag in the wrong place that is read as if it were in
// the right one.
func (r *ReplyReader) loose(what string) { r.warn(what + "; it was read as if it were") }

func (r *ReplyReader) openThink() {
	switch {
	case r.mode == inThink:
		r.warn("a think channel opened inside the think channel was left out")
	case r.inToolsSection():
		r.badInCall("a think channel")
	default:
		r.loose("a think channel opened after the answer began")
		r.mode = inThink
	}
}

func (r *ReplyReader) openResponse() {
	switch r.mode {
	case afterThink:
		r.mode = inAnswer
	case inThink:
		r.loose("the response channel opened before the think channel was closed")
		r.mode = inAnswer
	case inAnswer:
		r.warn("a response channel opened inside the response channel was left out")
	case afterResponse, afterTools, afterMessage:
		r.loose("a second response channel opened")
		r.mode = inAnswer
	default:
		r.badInCall("a response channel")
	}
}

func (r *ReplyReader) openTools() {
	switch r.mode {
	case afterResponse:
	case inThink:
		r.loose("the tools section opened inside the think channel")
	case inAnswer:
		r.loose("the tools section opened before the response channel was closed")
	case afterThink:
		r.loose("the tools section opened with no response channel before it")
	case afterTools, afterMessage:
		r.loose("a second tools section opened")
	default:
		r.badInCall("a tools section")
		return
	}
	r.mode = inTools
}

// openCall starts a tool call; one without a tool name (or with malformed
// attributes) is kept as bad, to be reported when it closes.
func (r *ReplyReader) openCall(head string, attrs map[string]string, attrErr error) {
	switch r.mode {
	case inTools:
	case inCall, inArg:
		r.badInCall("a tool call")
		return
	default:
		r.loose("a tool call opened outside a tools section")
	}
	r.mode = inCall
	r.call = &callBuilder{index: len(r.rep.ToolCalls) + r.left}
	switch {
	case attrErr != nil:
		r.call.bad = fmt.Sprintf("its tag %q has malformed attributes", head)
	case attrs["tool"] == "":
		r.call.bad = "it has no tool name"
	default:
		r.call.name = attrs["tool"]
		if !r.o.NoTools {
			r.emit(ReplyEvent{Kind: ReplyToolStart, Index: len(r.rep.ToolCalls),
				Call: ToolCall{Type: "function", Function: FunctionCall{Name: r.call.name}}})
		}
	}
}

// openArgument starts an argument (or json) tag inside a tool call.
func (r *ReplyReader) openArgument(name, head string, attrs map[string]string, attrErr error) {
	if r.mode != inCall {
		if r.mode == inArg {
			r.badInCall(fmt.Sprintf("an %s tag", name))
			return
		}
		r.unexpected(head)
		return
	}
	r.mode = inArg
	c := r.call
	c.argTag, c.argKey, c.argType = name, attrs["key"], attrs["type"]
	c.val.Reset()
	if attrErr != nil && c.bad == "" {
		c.bad = fmt.Sprintf("its tag %q has malformed attributes", head)
	}
}

func (r *ReplyReader) unexpected(head string) {
	r.warn(fmt.Sprintf("an unexpected tag %q was left out", head))
}

// badInCall marks the call being read as malformed (it will be left out).
func (r *ReplyReader) badInCall(what string) {
	if r.call != nil && r.call.bad == "" {
		r.call.bad = what + " opened inside it"
	} else if r.call == nil {
		r.warn(what + " opened inside the tools section was left out")
	}
}

func (r *ReplyReader) close(name string) {
	stray := func() { r.warn(fmt.Sprintf("a stray %s%s%s was left out", tokenizer.Close, name, tokenizer.Sep)) }
	switch name {
	case "think":
		if r.mode == inThink {
			r.mode = afterThink
			return
		}
		stray()
	case "response":
		switch r.mode {
		case inAnswer:
			r.mode = afterResponse
		case inThink:
			r.warn("the response channel was closed while thinking; its text is kept as reasoning")
			r.mode = afterResponse
		case afterThink:
			r.mode = afterResponse // an empty response channel, its opening tag left out
			r.warn("a response channel was closed that was not opened")
		default:
			stray()
		}
	case "argument", "json":
		if r.mode != inArg {
			stray()
			return
		}
		c := r.call
		if c.argTag != name && c.bad == "" {
			c.bad = fmt.Sprintf("its %s block is closed as %s", c.argTag, name)
		}
		c.addArg(r)
		r.mode = inCall
	case "call":
		switch r.mode {
		case inCall:
			r.endCall()
		case inArg:
			if r.call.bad == "" {
				r.call.bad = "an argument is not closed"
			}
			r.endCall()
		default:
			stray()
		}
	case "tools":
		switch r.mode {
		case inTools:
			r.mode = afterTools
		case inCall, inArg:
			r.warn("the tools section closed inside a tool call; the unfinished call was left out")
			r.call = nil
			r.mode = afterTools
		default:
			stray()
		}
	case "message":
		switch r.mode {
		case afterResponse, afterTools:
		case inThink, inAnswer, afterThink:
			r.warn("the message was closed before the channel")
		case inTools, inCall, inArg:
			r.endTools("the message closes")
		default:
			stray()
			return
		}
		r.mode = afterMessage
	default:
		stray()
	}
}

func (r *ReplyReader) endCall() {
	c := r.call
	r.call = nil
	r.mode = inTools
	if c.bad != "" {
		r.warn(fmt.Sprintf("tool call %d was left out: %s", c.index+1, c.bad))
		return
	}
	if r.o.NoTools {
		r.left++
		return
	}
	tc := ToolCall{Type: "function", Function: FunctionCall{Name: c.name, Arguments: c.arguments()}}
	r.rep.ToolCalls = append(r.rep.ToolCalls, tc)
	r.emit(ReplyEvent{Kind: ReplyToolEnd, Index: len(r.rep.ToolCalls) - 1, Call: tc})
}

// callBuilder collects one tool call's arguments as the model writes them:
// typed argument blocks become a JSON object written like Python's
// json.dumps; a json block is the arguments' text as written.
type callBuilder struct {
	index                   int
	name                    string
	bad                     string // why the call is left out
	argTag, argKey, argType string
	val                     strings.Builder
	args                    strings.Builder
	nargs                   int
	json                    string
}

func (c *callBuilder) addArg(r *ReplyReader) {
	value := c.val.String()
	if c.argTag == "json" {
		if !json.Valid([]byte(value)) {
			r.warn(fmt.Sprintf("tool call %d (%s): its json block is not valid JSON; the arguments are its text as written", c.index+1, c.name))
		}
		c.json = value
		return
	}
	if c.nargs == 0 {
		c.args.WriteByte('{')
	} else {
		c.args.WriteString(", ")
	}
	c.nargs++
	writePyString(&c.args, c.argKey)
	c.args.WriteString(": ")
	raw := strings.TrimSpace(value)
	switch {
	case c.argType == "string":
		writePyString(&c.args, value)
	case json.Valid([]byte(raw)):
		c.args.WriteString(raw)
	default:
		r.warn(fmt.Sprintf("tool call %d (%s): argument %q of type %q is not JSON; it is passed as a string", c.index+1, c.name, c.argKey, c.argType))
		writePyString(&c.args, value)
	}
}

func (c *callBuilder) arguments() string {
	switch {
	case c.nargs > 0:
		return c.args.String() + "}"
	case c.json != "":
		return c.json
	}
	return "{}"
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
