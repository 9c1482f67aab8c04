package xtml

import (
	"encoding/json"
	"errors"
	"fmt"
	"k3/tokenizer"
	"sort"
	"strconv"
	"strings"
)

// The Kimi K3 XTML chat format, as rendered by Moonshot's encoding_k3.py
// (build_chat_segments, called by apply_chat_template). A rendering is a
// list of segments, each encoded separately: control segments (the special
// tokens) with specials enabled, every other segment - tag names,
// attributes and all user, tool and assistant text - as ordinary text, so a
// user typing "<|end_of_msg|>" gets ordinary tokens. No BOS anywhere.

// Message is one chat message (OpenAI-style fields).
type Message struct {
	Role             string     `json:"role"` // system, user, assistant or tool
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"` // assistant
	Name             string     `json:"name,omitempty"`              // optional name attribute; a tool's name
	ToolCallID       string     `json:"tool_call_id,omitempty"`      // tool results
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`        // assistant
	// Parts, when set, is the content as text and image parts in order
	// (Content is then not rendered): an image renders Moonshot's image
	// prompt where it stands, one control segment with one media pad
	// (tokenizer.ImagePrompt; docs/VISION.md §5). Text parts are text:
	// a "<|kimi_image_placeholder|>" typed by the user stays text.
	Parts []Part `json:"-"`
	// ReasoningIDs and ContentIDs, when set, are the ids the model wrote
	// for an assistant's ReasoningContent and Content: they are fed as they
	// are instead of encoding the text again (text with invalid UTF-8, or
	// split other than the tokenizer would, reads back the same).
	ReasoningIDs []int `json:"-"`
	ContentIDs   []int `json:"-"`
}

// Part is one piece of a message's content: Text, or an Image of W x H
// pixels (its size as given, before any resize).
type Part struct {
	Text  string
	Image *ImageSize
}

// ImageSize is an image part's size in pixels.
type ImageSize struct{ W, H int }

// ToolCall is one assistant tool call.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and carries its arguments as JSON text (an
// object). When read from JSON, "arguments" may be a string (OpenAI style)
// or a JSON value, kept verbatim.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON accepts arguments given as a JSON string or as raw JSON.
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	f.Name = raw.Name
	f.Arguments = ""
	a := strings.TrimSpace(string(raw.Arguments))
	switch {
	case a == "" || a == "null":
	case a[0] == '"':
		return json.Unmarshal(raw.Arguments, &f.Arguments)
	default:
		f.Arguments = a
	}
	return nil
}

// Segment is one separately encoded piece of a rendering.
type Segment struct {
	Text    string
	Special bool  // encode with special tokens enabled (control tokens)
	IDs     []int // when set, the segment's ids as they are (Text is then not encoded)
}

// RenderOptions are apply_chat_template's keyword arguments.
type RenderOptions struct {
	// NoThink renders thinking=False: no thinking-effort message, history
	// without think blocks, and the generation prompt opens the response
	// channel.
	NoThink bool
	// ThinkingEffort is "low", "high" or "max" ("" means "max", the
	// reference default). Anything else is refused when thinking is on
	// ("medium" too: the reference rejects it although the prompt text
	// mentions it). Ignored with NoThink.
	ThinkingEffort string
	// NoGenerationPrompt leaves out the trailing open assistant turn.
	NoGenerationPrompt bool
	// ToolChoice "required" or "none" adds a tool-choice system message
	// after the history (only when tools are declared); "" and "auto" add
	// nothing.
	ToolChoice string
	// ResponseFormat is an OpenAI response_format object; json_object and
	// json_schema add a response-format system message.
	ResponseFormat json.RawMessage
}

// Valid thinking efforts; DefaultThinkingEffort is used when none is given.
var ThinkingEfforts = []string{"low", "high", "max"}

const DefaultThinkingEffort = "max"

const thinkingEffortBody = "`thinking_effort` guides on how much to think in your thinking channel " +
	"(not including the response channel), supported values include `low`, `medium`, `high`, and `max`.\n" +
	"Now the system is invoked with `thinking_effort=%s`."

type segs []Segment

func (s *segs) ctl(t string) { *s = append(*s, Segment{Text: t, Special: true}) }
func (s *segs) text(t string) {
	if t != "" {
		*s = append(*s, Segment{Text: t})
	}
}

// written is text the model wrote as ids: the ids when there are some,
// else the text.
func (s *segs) written(t string, ids []int) {
	if len(ids) == 0 {
		s.text(t)
		return
	}
	*s = append(*s, Segment{Text: t, IDs: ids})
}

type attr struct{ k, v string }

func escapeAttr(v string) string {
	return strings.ReplaceAll(strings.ReplaceAll(v, "&", "&amp;"), `"`, "&quot;")
}

func (s *segs) open(tag string, attrs ...attr) {
	s.ctl(tokenizer.Open)
	s.text(tag)
	for _, a := range attrs {
		s.text(" " + a.k)
		s.text(`="`)
		s.text(escapeAttr(a.v))
		s.text(`"`)
	}
	s.ctl(tokenizer.Sep)
}

func (s *segs) close(tag string) {
	s.ctl(tokenizer.Close)
	s.text(tag)
	s.ctl(tokenizer.Sep)
}

func (s *segs) system(kind, body string) {
	s.open("message", attr{"role", "system"}, attr{"type", kind})
	s.text(body)
	s.close("message")
	s.ctl(tokenizer.EndOfMsg)
}

// Render renders a conversation in the K3 XTML format. tools are OpenAI
// tool declarations (each a JSON object); they are declared in a first
// system message as compact JSON with every object's keys sorted.
func Render(msgs []Message, tools []json.RawMessage, opts RenderOptions) ([]Segment, error) {
	thinking := !opts.NoThink
	effort := opts.ThinkingEffort
	if effort == "" {
		effort = DefaultThinkingEffort
	}
	if thinking && !validEffort(effort) {
		return nil, fmt.Errorf("thinking effort %q is not one of low, high, max", effort)
	}
	switch opts.ToolChoice {
	case "", "auto", "required", "none":
	default:
		return nil, fmt.Errorf("tool_choice %q is not one of auto, required, none", opts.ToolChoice)
	}
	var s segs
	if len(tools) > 0 {
		if err := s.toolDeclare(tools); err != nil {
			return nil, err
		}
	}
	if thinking {
		s.system("thinking-effort", fmt.Sprintf(thinkingEffortBody, effort))
	}
	if err := s.messages(orderToolResults(msgs), thinking); err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		switch opts.ToolChoice {
		case "required":
			s.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.")
		case "none":
			s.system("tool-choice", "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.")
		}
	}
	if len(opts.ResponseFormat) > 0 {
		if err := s.responseFormat(opts.ResponseFormat); err != nil {
			return nil, err
		}
	}
	if !opts.NoGenerationPrompt {
		s.open("message", attr{"role", "assistant"})
		if thinking {
			s.open("think")
		} else {
			s.open("response")
		}
	}
	return s, nil
}

// toolDeclare writes the tools' declaration: each a JSON object, as
// compact Python-style JSON with sorted keys.
func (s *segs) toolDeclare(tools []json.RawMessage) error {
	arr := make([]any, len(tools))
	for i, raw := range tools {
		v, err := parseJSONValue(raw)
		if err != nil {
			return fmt.Errorf("tool %d: %v", i, err)
		}
		if _, ok := v.(jsonObject); !ok {
			return fmt.Errorf("tool %d: not a JSON object", i)
		}
		arr[i] = v
	}
	js, err := pyCompact(deepSort(arr))
	if err != nil {
		return err
	}
	s.system("tool-declare", "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"+js+"\n```")
	return nil
}

// messages writes each message; a tool result without a name takes the
// name of the matching call (by position) of the last assistant message.
func (s *segs) messages(msgs []Message, thinking bool) error {
	var lastCalls []ToolCall
	toolIndex := 0
	for i, m := range msgs {
		switch m.Role {
		case "user", "system":
			attrs := []attr{{"role", m.Role}}
			if m.Name != "" {
				attrs = append(attrs, attr{"name", m.Name})
			}
			s.open("message", attrs...)
			s.content(m)
		case "tool":
			toolIndex++
			name := m.Name
			if name == "" && toolIndex <= len(lastCalls) {
				name = lastCalls[toolIndex-1].Function.Name
			}
			if name == "" {
				return fmt.Errorf("message %d: tool result without a tool name or a matching tool call", i)
			}
			s.open("message", attr{"role", "tool"}, attr{"tool", name}, attr{"index", strconv.Itoa(toolIndex)})
			s.content(m)
		case "assistant":
			lastCalls = m.ToolCalls
			toolIndex = 0
			attrs := []attr{{"role", "assistant"}}
			if m.Name != "" {
				attrs = append(attrs, attr{"name", m.Name})
			}
			s.open("message", attrs...)
			if err := s.assistant(m, thinking); err != nil {
				return fmt.Errorf("message %d: %v", i, err)
			}
		default:
			return fmt.Errorf("message %d: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
		s.close("message")
		s.ctl(tokenizer.EndOfMsg)
	}
	return nil
}

func validEffort(e string) bool {
	for _, v := range ThinkingEfforts {
		if e == v {
			return true
		}
	}
	return false
}

// content renders a message's content: its Parts when set, else Content.
func (s *segs) content(m Message) {
	if m.Parts == nil {
		s.text(m.Content)
		return
	}
	for _, p := range m.Parts {
		if p.Image != nil {
			s.ctl(tokenizer.ImagePrompt(p.Image.W, p.Image.H))
		} else {
			s.text(p.Text)
		}
	}
}

func (s *segs) assistant(m Message, thinking bool) error {
	if thinking {
		s.open("think")
		if !tokenizer.PyIsBlank(m.ReasoningContent) {
			s.written(m.ReasoningContent, m.ReasoningIDs)
		}
		s.close("think")
	}
	s.open("response")
	if m.Parts == nil && len(m.ContentIDs) > 0 {
		s.written(m.Content, m.ContentIDs)
	} else {
		s.content(m)
	}
	s.close("response")
	if len(m.ToolCalls) == 0 {
		return nil
	}
	s.open("tools")
	for i, tc := range m.ToolCalls {
		if tc.Function.Name == "" {
			return fmt.Errorf("tool call %d has no function name", i+1)
		}
		s.open("call", attr{"tool", tc.Function.Name}, attr{"index", strconv.Itoa(i + 1)})
		args, ok, err := parseToolArguments(tc.Function.Arguments)
		if err != nil {
			return fmt.Errorf("tool call %d: %v", i+1, err)
		}
		if !ok {
			s.open("json", attr{"type", "object"})
			s.text(tc.Function.Arguments)
			s.close("json")
		}
		for _, a := range args {
			s.open("argument", attr{"key", a.key}, attr{"type", a.typ})
			s.text(a.text)
			s.close("argument")
		}
		s.close("call")
	}
	s.close("tools")
	return nil
}

func (s *segs) responseFormat(raw json.RawMessage) error {
	v, err := parseJSONValue(raw)
	if err != nil {
		return fmt.Errorf("response_format: %v", err)
	}
	obj, ok := v.(jsonObject)
	if !ok {
		return errors.New("response_format: not a JSON object")
	}
	get := func(o jsonObject, k string) (any, bool) {
		for _, m := range o {
			if m.key == k && m.val != nil {
				return m.val, true
			}
		}
		return nil, false
	}
	typ, _ := get(obj, "type")
	const plain = "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting."
	switch typ {
	case "json_object":
		s.system("response-format", "The system is invoked with `response_format=json_object`.\n"+plain)
	case "json_schema":
		var schema any
		if js, ok := get(obj, "json_schema"); ok {
			schema = js
			if o, isObj := js.(jsonObject); isObj {
				if x, ok := get(o, "schema"); ok {
					schema = x
				} else if x, ok := get(o, "json_schema"); ok {
					schema = x
				}
			}
		}
		text, err := pyCompact(deepSort(schema))
		if err != nil {
			return fmt.Errorf("response_format: %v", err)
		}
		s.system("response-format", "The system is invoked with `response_format=json_schema`.\n"+plain+
			"\nThe JSON data must match the following schema:\n```json\n"+text+"\n```")
	}
	return nil
}

// orderToolResults re-orders each run of consecutive tool messages to the
// order of the preceding assistant's tool_calls, matched by tool_call_id,
// and names each result after its call. A run with any result that does
// not match a call is left as it is.
func orderToolResults(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	var calls []ToolCall
	for i := 0; i < len(msgs); {
		m := msgs[i]
		if m.Role != "tool" {
			if m.Role == "assistant" {
				calls = m.ToolCalls
			}
			out = append(out, m)
			i++
			continue
		}
		j := i
		for j < len(msgs) && msgs[j].Role == "tool" {
			j++
		}
		run := append([]Message(nil), msgs[i:j]...)
		pos := make([]int, len(run))
		resolved := true
		for k, r := range run {
			pos[k] = -1
			for ci, c := range calls {
				if c.ID != "" && c.ID == r.ToolCallID {
					pos[k] = ci
					break
				}
			}
			if pos[k] < 0 {
				resolved = false
			}
		}
		if resolved {
			idx := make([]int, len(run))
			for k := range idx {
				idx[k] = k
			}
			sort.SliceStable(idx, func(a, b int) bool { return pos[idx[a]] < pos[idx[b]] })
			for _, k := range idx {
				r := run[k]
				r.Name = calls[pos[k]].Function.Name
				out = append(out, r)
			}
		} else {
			out = append(out, run...)
		}
		i = j
	}
	return out
}

// Text concatenates the segments: the rendered prompt as a string.
func Text(s []Segment) string {
	var b strings.Builder
	for _, x := range s {
		b.WriteString(x.Text)
	}
	return b.String()
}

// Encode encodes each segment on its own with t (control segments with
// specials enabled, text segments as ordinary text) and concatenates.
func Encode(t *tokenizer.Tokenizer, s []Segment) []int {
	var out []int
	for _, x := range s {
		if x.IDs != nil {
			out = append(out, x.IDs...)
		} else if x.Special {
			out = append(out, t.EncodeSpecial(x.Text)...)
		} else {
			out = append(out, t.Encode(x.Text)...)
		}
	}
	return out
}
