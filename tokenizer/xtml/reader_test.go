package xtml

import (
	"encoding/json"
	"k3/tokenizer"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reply reader's rules, one test per rule. The cases come from the
// Kimi K3 parser tests of vLLM (tests/tool_use/test_kimi_k3_tool_parser.py,
// tests/reasoning/test_kimi_k3_reasoning_parser.py), SGLang
// (test/registered/function_call/test_kimik3_detector.py,
// test/registered/unit/parser/test_kimik3_reasoning_parser.py) and
// LightLLM (its Kimi K3 detector test), named in each row with the case
// ids of docs/replies.md. Their model output is mapped onto what follows
// k3's generation prompt: a leading think-open is dropped and the row runs
// with thinking on, a leading response-open is dropped and it runs with
// thinking off. Each row runs twice, on ids from a tokenizer with merges
// (whole words, "all at once") and on one id per byte (text split
// everywhere, UTF-8 too, "token by token"); both must give the same
// events and the same Reply.

const (
	xO = tokenizer.Open
	xC = tokenizer.Close
	xS = tokenizer.Sep
)

func xArg(key, typ, value string) string {
	return xO + `argument key="` + key + `" type="` + typ + `"` + xS + value + xC + "argument" + xS
}

func xCall(tool string, index string, args ...string) string {
	return xO + `call tool="` + tool + `" index="` + index + `"` + xS + strings.Join(args, "") + xC + "call" + xS
}

func xTools(calls ...string) string {
	return xO + "tools" + xS + strings.Join(calls, "") + xC + "tools" + xS
}

const (
	xThinkClose    = xC + "think" + xS
	xResponseOpen  = xO + "response" + xS
	xResponseClose = xC + "response" + xS
	xMessageClose  = xC + "message" + xS
)

// SGLang's LEAKED_TOOLS_SECTION.
var xLeaked = xTools(xCall("read_agent", "1", xArg("id", "string", "worker_1"))) + xMessageClose

type readerCase struct {
	name     string // case id (docs/replies.md) and the source test
	thinking bool
	noTools  bool
	output   string
	// want
	reasoning, content string
	calls              []string // "name ARGS-JSON"
	warn               string   // a substring of the warnings; "" means none
}

type readerRun struct {
	events []ReplyEvent // adjacent text events of one kind merged
	reply  Reply
}

type readerToks struct {
	merged, bytes *tokenizer.Tokenizer
	byteID        map[byte]int
}

func newReaderToks(t *testing.T) readerToks {
	t.Helper()
	dir := t.TempDir()
	text := strings.Repeat("think response tools call argument json message answer thought reply type string number python tool index key ", 4)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{Text: text, Merges: 60}))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	rt := readerToks{merged: tok, bytes: tok, byteID: map[byte]int{}}
	for id := 0; id < tok.VocabSize(); id++ {
		if b := tok.TokenBytes(id); !tok.IsSpecial(id) && len(b) == 1 {
			rt.byteID[b[0]] = id
		}
	}
	require.Len(t, rt.byteID, 256)
	return rt
}

// ids returns the output's ids: merged, or one id per byte.
func (rt readerToks) ids(output string, perByte bool) []int {
	ids := rt.merged.EncodeSpecial(output)
	if !perByte {
		return ids
	}
	var out []int
	for _, id := range ids {
		if rt.merged.IsSpecial(id) {
			out = append(out, id)
			continue
		}
		for _, b := range rt.merged.TokenBytes(id) {
			out = append(out, rt.byteID[b])
		}
	}
	return out
}

func (rt readerToks) run(t *testing.T, c readerCase, perByte bool) readerRun {
	t.Helper()
	r := NewReplyReader(rt.merged, ReplyOptions{Thinking: c.thinking, NoTools: c.noTools, NoToolsWhy: "no tools were declared"})
	var run readerRun
	add := func(evs []ReplyEvent) {
		for _, ev := range evs {
			n := len(run.events)
			if n > 0 && (ev.Kind == ReplyReasoning || ev.Kind == ReplyContent) && run.events[n-1].Kind == ev.Kind {
				run.events[n-1].Text += ev.Text
				continue
			}
			run.events = append(run.events, ev)
		}
	}
	for _, id := range rt.ids(c.output, perByte) {
		add(r.Add(id))
	}
	add(r.Finish())
	run.reply = r.Reply()
	return run
}

// check runs a case both ways and asserts the expected reply and that the
// events are the reply.
func (rt readerToks) check(t *testing.T, c readerCase) {
	t.Helper()
	a, b := rt.run(t, c, false), rt.run(t, c, true)
	assert.Greater(t, b.reply.ReasoningTokens+1, a.reply.ReasoningTokens, "%s: one id per byte counts more ids", c.name)
	a.reply.ReasoningTokens, b.reply.ReasoningTokens = 0, 0 // the ids differ
	assert.Equal(t, a, b, "%s: all at once and token by token differ", c.name)
	r := a.reply
	assert.Equal(t, c.reasoning, r.Reasoning, "%s: reasoning", c.name)
	assert.Equal(t, c.content, r.Content, "%s: content", c.name)
	var calls []string
	for _, tc := range r.ToolCalls {
		calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
	}
	require.Len(t, calls, len(c.calls), "%s: calls %q", c.name, calls)
	for i, want := range c.calls {
		wn, wargs, _ := strings.Cut(want, " ")
		gn, gargs, _ := strings.Cut(calls[i], " ")
		assert.Equal(t, wn, gn, c.name)
		if json.Valid([]byte(wargs)) {
			assert.JSONEq(t, wargs, gargs, c.name)
		} else {
			assert.Equal(t, wargs, gargs, c.name)
		}
	}
	if c.warn == "" {
		assert.Empty(t, r.Warnings, c.name)
	} else {
		assert.Contains(t, strings.Join(r.Warnings, "\n"), c.warn, c.name)
	}
	// the events are the reply: text, calls and warnings, in order
	var reasoning, content strings.Builder
	var ends []ToolCall
	var warns []string
	for _, ev := range a.events {
		switch ev.Kind {
		case ReplyReasoning:
			reasoning.WriteString(ev.Text)
		case ReplyContent:
			content.WriteString(ev.Text)
		case ReplyToolEnd:
			assert.Equal(t, len(ends), ev.Index)
			ends = append(ends, ev.Call)
		case ReplyWarning:
			warns = append(warns, ev.Text)
		}
	}
	assert.Equal(t, r.Reasoning, reasoning.String(), c.name)
	assert.Equal(t, r.Content, content.String(), c.name)
	assert.Equal(t, r.ToolCalls, ends, c.name)
	assert.Equal(t, r.Warnings, warns, c.name)
}

func (rt readerToks) checkAll(t *testing.T, cases []readerCase) {
	for _, c := range cases {
		rt.check(t, c)
	}
}

// TestReaderWellFormed: turns written as the chat format says read
// without warnings (vLLM, SGLang and LightLLM agree on all of these).
func TestReaderWellFormed(t *testing.T) {
	rt := newReaderToks(t)
	calc := xTools(xCall("calc", "1", xArg("x", "number", "1")))
	rt.checkAll(t, []readerCase{
		// V1 vLLM extract_tool_calls_with_response_and_typed_arguments
		{name: "V1", output: "answer" + xResponseClose + xTools(xCall("calc", "1", xArg("x", "number", "1"), xArg("flag", "boolean", "true"), xArg("text", "string", "raw"))),
			content: "answer", calls: []string{`calc {"x":1,"flag":true,"text":"raw"}`}},
		// V2 vLLM delegating_parser_preserves_tool_calls_after_reasoning
		{name: "V2", thinking: true, output: "step" + xThinkClose + xResponseOpen + "answer" + xResponseClose + calc,
			reasoning: "step", content: "answer", calls: []string{`calc {"x":1}`}},
		// V3 vLLM delegating_parser_required_tool_choice / named_tool_choice
		{name: "V3", thinking: true, output: "step" + xThinkClose + xResponseOpen + xResponseClose + calc,
			reasoning: "step", calls: []string{`calc {"x":1}`}},
		// V4 vLLM delegating_parser_auto_no_call_strips_consumed_response_prefix (also V19
		// thinking_disabled_streams_content, V20 delegating_parser_thinking_false_streams_response_content)
		{name: "V4", output: "answer" + xResponseClose, content: "answer"},
		// V5 vLLM delegating_parser_required_call_strips_consumed_response_prefix
		{name: "V5", output: xResponseClose + calc, calls: []string{`calc {"x":1}`}},
		// V11 vLLM tool_call_ids_are_unique_across_messages (ids: the server's)
		{name: "V11", output: xResponseClose + xTools(xCall("calc", "1")), calls: []string{`calc {}`}},
		// V12 vLLM streaming_consumed_response_prefix_no_call_keeps_content
		{name: "V12", output: "OK" + xResponseClose, content: "OK"},
		// V15 vLLM extract_reasoning_with_xtml_tags, V16 extract_reasoning_with_generation_prefix_consumed
		{name: "V15", thinking: true, output: "step" + xThinkClose + xResponseOpen + "answer" + xResponseClose, reasoning: "step", content: "answer"},
		// V17 vLLM extract_reasoning_truncated_before_close_marker
		{name: "V17", thinking: true, output: "unfinished reasoning", reasoning: "unfinished reasoning"},
		// V18 vLLM extract_markerless_output_with_thinking_disabled
		{name: "V18", output: "answer", content: "answer"},
		// S1 SGLang detect_and_parse_single_call
		{name: "S1", output: "Let me run it." + xResponseClose + xTools(xCall("python", "1", xArg("code", "string", "print(1)"), xArg("opts", "object", `{"a": 1}`))),
			content: "Let me run it.", calls: []string{`python {"code":"print(1)","opts":{"a":1}}`}},
		// S2 SGLang detect_and_parse_no_tools_channel
		{name: "S2", output: "hi there" + xResponseClose + xMessageClose, content: "hi there"},
		// S7 SGLang streaming_split_markers (chunks of 1, 7, 23)
		{name: "S7", output: "Hello!" + xResponseClose + xTools(xCall("python", "1", xArg("code", "string", "print(2)"))),
			content: "Hello!", calls: []string{`python {"code":"print(2)"}`}},
		// S8 SGLang streaming_plain_text_only
		{name: "S8", output: "just a plain reply", content: "just a plain reply"},
		// S15 SGLang unparsed_tools_section_dropped_with_reply_kept (tools declared: read)
		{name: "S15", output: "on it" + xResponseClose + xLeaked, content: "on it", calls: []string{`read_agent {"id":"worker_1"}`}},
		// S18 SGLang think_channel_content: cut off mid-thought
		{name: "S18", thinking: true, output: "cut off mid-thought", reasoning: "cut off mid-thought"},
		// S25 SGLang non_stream_reasoning_channels #1 (and streaming_split_markers 1/4/13)
		{name: "S25", thinking: true, output: "deep thought" + xThinkClose + xResponseOpen + "the answer" + xResponseClose + xMessageClose,
			reasoning: "deep thought", content: "the answer"},
		// S26 SGLang non_stream_reasoning_channels #2
		{name: "S26", thinking: true, output: "thinking..." + xThinkClose + xResponseOpen + "done" + xResponseClose, reasoning: "thinking...", content: "done"},
		// S28 SGLang non_stream_reasoning_channels #4
		{name: "S28", thinking: true, output: "still going", reasoning: "still going"},
		// S29 SGLang non_stream_tools_channel_passthrough (read by the tool detector)
		{name: "S29", thinking: true, output: "thought" + xThinkClose + xResponseOpen + "reply" + xResponseClose + xTools(xCall("python", "1")),
			reasoning: "thought", content: "reply", calls: []string{`python {}`}},
		// S21, S22 SGLang plain_text_is_untouched
		{name: "S21", output: "a < b and c |> d", content: "a < b and c |> d"},
		{name: "S22", output: "is 3 < 4? yes <", content: "is 3 < 4? yes <"},
		// S10 SGLang stream_end_releases_held_back_text
		{name: "S10", output: "all done<", content: "all done<"},
		// S37 SGLang preserves_non_marker_angle_bracket_suffix
		{name: "S37", thinking: true, output: xThinkClose + xResponseOpen + "answer <3", content: "answer <3"},
		// L1 LightLLM kimi_k3_xtml_argument_tool_call
		{name: "L1", output: xResponseClose + xTools(xCall("get_weather", "1", xArg("city", "string", "上海"), xArg("days", "number", "3"))) + xMessageClose,
			calls: []string{`get_weather {"city":"上海","days":3}`}},
		// L2 LightLLM kimi_k3_xtml_json_tool_call_streaming: a json block
		// (vLLM's and SGLang's K3 parsers read argument blocks only)
		{name: "L2", output: xResponseClose + xO + "tools" + xS + xO + `call tool="get_weather" index="1"` + xS + xO + `json type="object"` + xS + `{"city":"Paris"}` + xC + "json" + xS + xC + "call" + xS + xC + "tools" + xS + xMessageClose,
			calls: []string{`get_weather {"city":"Paris"}`}},
		// L3 LightLLM kimi_k3_xtml_plain_response_is_cleaned_in_streaming_mode
		{name: "L3", output: "hello" + xResponseClose + xMessageClose, content: "hello"},
		// k3: a whole turn, ended
		{name: "k3 two calls", thinking: true, output: genTwoCalls[len("<|close|>think<|sep|>")-len(xThinkClose):], content: "Checking both.",
			calls: []string{`search {"q":"go 1.26","limit":5,"ratio":-2.5e3,"exact":true,"after":null}`, `plot {"opts":{"w":3,"tags":{"a":[1,2]}},"xs":[1,"two",null]}`}},
	})
}

// TestReaderNoMarkup: a control sequence cut off at the end of the output
// (the token cap landing inside a tag) never reaches the text.
func TestReaderNoMarkup(t *testing.T) {
	rt := newReaderToks(t)
	rt.checkAll(t, []readerCase{
		// S11 SGLang stream_end_drops_truncated_marker
		{name: "S11", output: "all done" + xO, content: "all done", warn: "ends inside a tag"},
		// S13, S14 SGLang truncated_markers_leave_no_text
		{name: "S13", output: xC + "response", warn: "ends inside a tag"},
		{name: "S14", output: xO + "tools", warn: "ends inside a tag"},
		// S16 SGLang narration_before_truncated_marker_survives
		{name: "S16", output: "I am delegating the docs subagent." + xC + "response", content: "I am delegating the docs subagent.", warn: "ends inside a tag"},
		// S23 SGLang parser_strips_when_detection_misses
		{name: "S23", output: "done" + xO + "tool", content: "done", warn: "ends inside a tag"},
		// S31-S36 SGLang non_stream_strips_partial_marker_suffixes
		{name: "S31", thinking: true, output: "deep thought" + xC, reasoning: "deep thought", warn: "ends inside a tag"},
		{name: "S32", thinking: true, output: "deep thought" + xC + "think", reasoning: "deep thought", warn: "ends inside a tag"},
		{name: "S33", thinking: true, output: xThinkClose + xO, warn: "ends inside a tag"},
		{name: "S34", thinking: true, output: xThinkClose + xO + "response", warn: "ends inside a tag"},
		{name: "S35", thinking: true, output: xThinkClose + xResponseOpen + "the answer" + xC + "response", content: "the answer", warn: "ends inside a tag"},
		{name: "S36", thinking: true, output: xThinkClose + xResponseOpen + "the answer" + xResponseClose + xC + "message", content: "the answer", warn: "ends inside a tag"},
		// V9 vLLM extract_content_from_whitespace_degraded_markers: spaces
		// inside a tag are not part of its name
		{name: "V9", output: "answer" + xC + " response " + xS, content: "answer"},
		// where k3 differs (docs/replies.md): S12 SGLang
		// strip_template_artifacts marker-only response gives "": k3 keeps
		// what the response channel holds, whitespace too; S20 SGLang
		// quoted_call_token_without_attributes_survives keeps the text after
		// the tag: k3 leaves out a tag the output never ends
		{name: "S12", output: "   " + xResponseClose, content: "   "},
		{name: "S20", output: "calls open with " + xO + "call, then attributes", content: "calls open with ", warn: "ends inside a tag"},
		// k3: a special token that is not a chat control, a stray <|sep|>
		{name: "k3 bos", output: "a[BOS]b" + xResponseClose, content: "ab", warn: "unexpected special token [BOS]"},
		{name: "k3 sep", output: "a" + xS + "b" + xResponseClose, content: "ab", warn: "a stray <|sep|>"},
		{name: "k3 nameless", thinking: true, output: "a" + xO + xS + "b" + xC + " " + xS + "c", reasoning: "abc", warn: "unexpected tag"},
	})
}

// TestReaderCutTools: a tools section cut off (the token cap) or never
// closed keeps its complete calls and leaves out the unfinished one.
func TestReaderCutTools(t *testing.T) {
	rt := newReaderToks(t)
	cut := strings.Index(genTwoCalls, `<|open|>call tool="plot"`) + 20
	rt.checkAll(t, []readerCase{
		// V6 vLLM delegating_parser_truncated_tools_do_not_leak_xtml
		{name: "V6", output: xResponseClose + xO + "tools" + xS + xO + `call tool="calc" index="1"`, warn: "ends inside a tag"},
		// S4 SGLang detect_and_parse_unclosed_tools_section (S4g: with the response channel)
		{name: "S4", output: xO + "tools" + xS + xCall("python", "1", xArg("code", "string", "x")), calls: []string{`python {"code":"x"}`}, warn: "its complete calls were kept"},
		{name: "S4g", output: xResponseClose + xO + "tools" + xS + xCall("python", "1", xArg("code", "string", "x")), calls: []string{`python {"code":"x"}`}, warn: "its complete calls were kept"},
		// S9 SGLang stream_end_reports_truncated_tools_section
		{name: "S9", output: xO + "tools" + xS + xO + `call tool="python" index="1"` + xS, warn: "the unfinished call was left out"},
		// V10 vLLM streaming_split_markers_do_not_leak
		{name: "V10", output: "Hi" + xO + "tools" + xS + xCall("calc", "1", xArg("x", "number", "1")), content: "Hi", calls: []string{`calc {"x":1}`}, warn: "its complete calls were kept"},
		// k3: cut inside the second call's tag, and inside its argument
		{name: "k3 cut tag", thinking: true, output: genTwoCalls[:cut], content: "Checking both.",
			calls: []string{`search {"q":"go 1.26","limit":5,"ratio":-2.5e3,"exact":true,"after":null}`}, warn: "ends inside a tag"},
		{name: "k3 cut argument", thinking: true, output: genTwoCalls[:strings.Index(genTwoCalls, `"tags"`)], content: "Checking both.",
			calls: []string{`search {"q":"go 1.26","limit":5,"ratio":-2.5e3,"exact":true,"after":null}`}, warn: "the unfinished call was left out"},
		// k3: the tools section closed inside a call, and the turn ended inside one
		{name: "k3 closed inside", output: xResponseClose + xO + "tools" + xS + xCall("f", "1") + xO + `call tool="g" index="2"` + xS + xC + "tools" + xS + xMessageClose + tokenizer.EndOfMsg,
			calls: []string{`f {}`}, warn: "closed inside a tool call"},
		{name: "k3 ended inside", output: xResponseClose + xO + "tools" + xS + xCall("f", "1") + xO + `call tool="g" index="2"` + xS + tokenizer.EndOfMsg,
			calls: []string{`f {}`}, warn: "the turn ends inside a tool call"},
	})
}

// TestReaderToolsAnywhere: a tools section with no response channel before
// it, or opened inside the think or response channel, is read.
func TestReaderToolsAnywhere(t *testing.T) {
	rt := newReaderToks(t)
	rt.checkAll(t, []readerCase{
		// V7 vLLM extract_tool_calls_unescapes_attributes
		{name: "V7", output: xTools(xCall("a&amp;b&quot;c", "1", xArg("k&amp;q", "string", "v"))), calls: []string{`a&b"c {"k&q":"v"}`}, warn: "before the response channel was closed"},
		// V8 vLLM extract_tool_calls_allows_less_than_in_attributes
		{name: "V8", output: xTools(xCall("calc<beta", "1", xArg("foo<bar", "string", "raw"))), calls: []string{`calc<beta {"foo<bar":"raw"}`}, warn: "before the response channel was closed"},
		// S3 SGLang detect_and_parse_multiple_calls (and streaming_two_calls)
		{name: "S3", output: xTools(xCall("python", "1", xArg("code", "string", "a")), xCall("python", "2", xArg("code", "string", "b"))),
			calls: []string{`python {"code":"a"}`, `python {"code":"b"}`}, warn: "before the response channel was closed"},
		// S5 SGLang attr_unescaping_and_raw_string_args
		{name: "S5", output: xTools(xCall("a&amp;b", "1", xArg("q", "string", "say &quot;hi&quot;"))), calls: []string{`a&b {"q":"say &quot;hi&quot;"}`}, warn: "before the response channel was closed"},
		// S6 SGLang non_string_arg_json_decoding
		{name: "S6", output: xTools(xCall("python", "1", xArg("n", "number", "42"), xArg("flag", "boolean", "true"), xArg("bad", "object", "{not json"))),
			calls: []string{`python {"n":42,"flag":true,"bad":"{not json"}`}, warn: `argument "bad" of type "object" is not JSON`},
		// S19 SGLang think_close_without_open_drops_reasoning, with the leaked tools section
		{name: "S19", thinking: true, output: "deliberating" + xThinkClose + xLeaked, reasoning: "deliberating",
			calls: []string{`read_agent {"id":"worker_1"}`}, warn: "no response channel before it"},
		// S38 SGLang non_stream_tools_channel_before_think_close_is_not_reasoning
		{name: "S38", thinking: true, output: "thought" + xTools(xCall("python", "1")) + xThinkClose + xMessageClose, reasoning: "thought",
			calls: []string{`python {}`}, warn: "inside the think channel"},
		// the same with the empty response channel K3's encoder writes
		// (docs/replies.md's g rows): read without warnings
		{name: "V7g", output: xResponseClose + xTools(xCall("a&amp;b&quot;c", "1", xArg("k&amp;q", "string", "v"))), calls: []string{`a&b"c {"k&q":"v"}`}},
		{name: "V8g", output: xResponseClose + xTools(xCall("calc<beta", "1", xArg("foo<bar", "string", "raw"))), calls: []string{`calc<beta {"foo<bar":"raw"}`}},
		{name: "S3g", output: xResponseClose + xTools(xCall("python", "1", xArg("code", "string", "a")), xCall("python", "2", xArg("code", "string", "b"))),
			calls: []string{`python {"code":"a"}`, `python {"code":"b"}`}},
		{name: "S5g", output: xResponseClose + xTools(xCall("a&amp;b", "1", xArg("q", "string", "say &quot;hi&quot;"))), calls: []string{`a&b {"q":"say &quot;hi&quot;"}`}},
		{name: "S19g", thinking: true, output: "deliberating" + xThinkClose + xResponseOpen + xResponseClose + xLeaked, reasoning: "deliberating",
			calls: []string{`read_agent {"id":"worker_1"}`}},
		// k3: a call written with no tools section around it
		{name: "k3 bare call", output: "ok" + xResponseClose + xCall("f", "1", xArg("a", "number", "2")) + xMessageClose, content: "ok",
			calls: []string{`f {"a":2}`}, warn: "outside a tools section"},
	})
}

// TestReaderOneField: each piece of text goes to one field only; a
// skipped or malformed think close never puts the answer in both.
func TestReaderOneField(t *testing.T) {
	rt := newReaderToks(t)
	rt.checkAll(t, []readerCase{
		// S27 SGLang non_stream_reasoning_channels #3 (think skipped)
		{name: "S27", thinking: true, output: xResponseOpen + "plain reply" + xResponseClose + xMessageClose, content: "plain reply", warn: "before the think channel was closed"},
		// S30 SGLang non_stream_recovers_missing_think_separator
		{name: "S30", thinking: true, output: "thought" + xC + "think" + xResponseOpen + "reply" + xResponseClose, reasoning: "thought", content: "reply", warn: "was not ended by <|sep|>"},
		// S17 SGLang think_channel_content_is_dropped_not_unwrapped
		{name: "S17", thinking: true, output: "secret" + xThinkClose + "visible", reasoning: "secret", content: "visible", warn: "outside the response channel"},
		// S39 SGLang fnc_non_stream_skipped_think (force_nonempty_content):
		// SGLang moves the text to content after streaming it as reasoning;
		// k3 keeps it where it streamed
		{name: "S39", thinking: true, output: "bare answer" + xResponseClose + xMessageClose, reasoning: "bare answer", warn: "closed while thinking"},
		// k3: whitespace between channels is not answer text
		{name: "k3 newline", thinking: true, output: "r" + xThinkClose + "\n" + xResponseOpen + "a" + xResponseClose + "\n" + xMessageClose, reasoning: "r", content: "a"},
	})
}

// TestReaderNoTools: with no tools declared or tool_choice "none" the calls
// the model writes anyway are left out, with a warning, and never reach
// the text.
func TestReaderNoTools(t *testing.T) {
	rt := newReaderToks(t)
	calc := xTools(xCall("calc", "1", xArg("x", "number", "1")))
	rt.checkAll(t, []readerCase{
		// V13 vLLM delegating_parser_tool_choice_none_strips_xtml_and_suppresses_calls
		{name: "V13", noTools: true, output: "answer" + xResponseClose + calc, content: "answer", warn: "1 tool call(s) but no tools were declared"},
		// V14 vLLM delegating_parser_message_level_tools_none_strips_channels
		{name: "V14", thinking: true, noTools: true, output: "step" + xThinkClose + xResponseOpen + "answer" + xResponseClose + calc,
			reasoning: "step", content: "answer", warn: "left out"},
		// S24 SGLang parser_strips_when_no_tools_declared
		{name: "S24", noTools: true, output: xLeaked, warn: "left out"},
	})
	// no ToolStart either
	r := NewReplyReader(rt.merged, ReplyOptions{NoTools: true})
	for _, id := range rt.merged.EncodeSpecial("a" + xResponseClose + calc) {
		for _, ev := range r.Add(id) {
			assert.NotEqual(t, ReplyToolStart, ev.Kind)
			assert.NotEqual(t, ReplyToolEnd, ev.Kind)
		}
	}
}

// TestReaderWarnings: what is read loosely is named, once; a turn written
// as the format says has no warnings and is Complete.
func TestReaderWarnings(t *testing.T) {
	rt := newReaderToks(t)
	rt.checkAll(t, []readerCase{
		{name: "typed not JSON", output: xResponseClose + xTools(xCall("f", "1", xArg("n", "number", "twelve"))), calls: []string{`f {"n":"twelve"}`}, warn: `argument "n" of type "number" is not JSON`},
		{name: "json not JSON", output: xResponseClose + xTools(xCall("f", "1", xO+`json type="object"`+xS+"{bad"+xC+"json"+xS)), calls: []string{`f {bad`}, warn: "json block is not valid JSON"},
		{name: "no tool name", output: xResponseClose + xTools(xO+`call index="1"`+xS+xC+"call"+xS), warn: "tool call 1 was left out: it has no tool name"},
		{name: "after the end", output: "a" + xResponseClose + xMessageClose + tokenizer.EndOfMsg + "junk", content: "a", warn: "output after the end of the turn"},
		{name: "unclosed message", output: "a" + xResponseClose + tokenizer.EndOfMsg, content: "a", warn: "without closing the message"},
	})
	tok := rt.merged
	r := ReadReply(tok, tok.EncodeSpecial(genOneCall), ReplyOptions{Thinking: true})
	assert.Empty(t, r.Warnings)
	require.NoError(t, r.Err())
	assert.True(t, r.Complete)
	assert.Equal(t, "Weather needs a lookup.", r.Reasoning)
	assert.Equal(t, len(tok.Encode("Weather needs a lookup.")), r.ReasoningTokens)
	r = ReadReply(tok, tok.EncodeSpecial("a"+xS+"b"+xS), ReplyOptions{})
	assert.Equal(t, []string{"a stray <|sep|> was left out"}, r.Warnings, "said once")
	assert.EqualError(t, r.Err(), "a stray <|sep|> was left out")
	r = ReadReply(tok, []int{-1, tok.VocabSize()}, ReplyOptions{})
	assert.Len(t, r.Warnings, 2)
}

// TestReaderMarkupInArguments: through ids, argument text that spells
// control tokens, quotes, ampersands and newlines stays the argument's
// text; an attribute's &quot; and &amp; are unescaped.
func TestReaderMarkupInArguments(t *testing.T) {
	tok := realIDsTokenizer(t)
	value := "<|open|>x<|sep|> & \"quoted\"\n<|close|>argument<|sep|> </a>"
	var ids []int
	ids = append(ids, tok.EncodeSpecial(`<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>`)...)
	ids = append(ids, tok.EncodeSpecial(`<|open|>call tool="edit" index="1"<|sep|><|open|>argument key="a&amp;b &quot;c&quot;" type="string"<|sep|>`)...)
	ids = append(ids, tok.Encode(value)...)
	ids = append(ids, tok.EncodeSpecial(`<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`)...)
	r := ReadReply(tok, ids, ReplyOptions{Thinking: true})
	assert.Empty(t, r.Warnings)
	require.Len(t, r.ToolCalls, 1)
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.ToolCalls[0].Function.Arguments), &args))
	assert.Equal(t, map[string]string{`a&b "c"`: value}, args)
	// text that spells a control token in the answer is text too
	ids = append(tok.Encode("a<|close|>response<|sep|>b"), tok.EncodeSpecial("<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")...)
	r = ReadReply(tok, ids, ReplyOptions{})
	assert.Equal(t, Reply{Content: "a<|close|>response<|sep|>b", Complete: true}, r)
}

// TestReaderRendersBack: an assistant message with tool calls, rendered
// and read back from the generation point, gives the same message.
func TestReaderRendersBack(t *testing.T) {
	msg := Message{Role: "assistant", Content: "ok", ReasoningContent: "hmm", ToolCalls: []ToolCall{
		{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"s":"x<y>&z","n":1.5,"o":{"k":[true]}}`}},
		{ID: "c2", Type: "function", Function: FunctionCall{Name: "g", Arguments: `{}`}},
	}}
	segs, err := Render([]Message{msg}, nil, RenderOptions{NoGenerationPrompt: true})
	require.NoError(t, err)
	tok := realIDsTokenizer(t)
	ids := Encode(tok, segs)
	head := tok.EncodeSpecial(`<|open|>message role="assistant"<|sep|><|open|>think<|sep|>`)
	i := indexIDs(ids, head)
	require.GreaterOrEqual(t, i, 0)
	r := ReadReply(tok, ids[i+len(head):], ReplyOptions{Thinking: true})
	assert.Empty(t, r.Warnings)
	assert.True(t, r.Complete)
	back := r.Message()
	assert.Equal(t, "hmm", back.ReasoningContent)
	assert.Equal(t, "ok", back.Content)
	require.Len(t, back.ToolCalls, 2)
	for k, tc := range back.ToolCalls {
		assert.Equal(t, msg.ToolCalls[k].Function.Name, tc.Function.Name)
		assert.JSONEq(t, msg.ToolCalls[k].Function.Arguments, tc.Function.Arguments)
	}
}

func indexIDs(ids, sub []int) int {
	for i := 0; i+len(sub) <= len(ids); i++ {
		ok := true
		for j := range sub {
			ok = ok && ids[i+j] == sub[j]
		}
		if ok {
			return i
		}
	}
	return -1
}

// BenchmarkReplyReader reads a two-call turn id by id (ns per turn; the
// turn's id count is reported as ids/op).
func BenchmarkReplyReader(b *testing.B) {
	dir := b.TempDir()
	require.NoError(b, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
	require.NoError(b, err)
	ids := tok.EncodeSpecial(genTwoCalls)
	for b.Loop() {
		ReadReply(tok, ids, ReplyOptions{Thinking: true})
	}
	b.ReportMetric(float64(len(ids)), "ids/op")
}
