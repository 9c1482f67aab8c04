package tokenizer

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// K3 output strings as the model writes them after the generation prompt.
const (
	genOneCall = `Weather needs a lookup.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>` +
		`<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>` +
		`<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>` +
		`<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`
	genTwoCalls = `<|close|>think<|sep|><|open|>response<|sep|>Checking both.<|close|>response<|sep|>` +
		`<|open|>tools<|sep|>` +
		`<|open|>call tool="search" index="1"<|sep|>` +
		`<|open|>argument key="q" type="string"<|sep|>go 1.26<|close|>argument<|sep|>` +
		`<|open|>argument key="limit" type="number"<|sep|>5<|close|>argument<|sep|>` +
		`<|open|>argument key="ratio" type="number"<|sep|>-2.5e3<|close|>argument<|sep|>` +
		`<|open|>argument key="exact" type="boolean"<|sep|>true<|close|>argument<|sep|>` +
		`<|open|>argument key="after" type="null"<|sep|>null<|close|>argument<|sep|>` +
		`<|close|>call<|sep|>` +
		`<|open|>call tool="plot" index="2"<|sep|>` +
		`<|open|>argument key="opts" type="object"<|sep|>{"w": 3, "tags": {"a": [1, 2]}}<|close|>argument<|sep|>` +
		`<|open|>argument key="xs" type="array"<|sep|>[1, "two", null]<|close|>argument<|sep|>` +
		`<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`
)

func TestParseReplyOneCall(t *testing.T) {
	r := ParseReply(genOneCall, true)
	assert.Empty(t, r.Warnings)
	assert.True(t, r.Complete)
	assert.Equal(t, "Weather needs a lookup.", r.Reasoning)
	assert.Equal(t, "", r.Content)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, "get_weather", r.ToolCalls[0].Function.Name)
	assert.Equal(t, "function", r.ToolCalls[0].Type)
	assert.JSONEq(t, `{"city":"Paris"}`, r.ToolCalls[0].Function.Arguments)
}

func TestParseReplySeveralCallsTypedArguments(t *testing.T) {
	r := ParseReply(genTwoCalls, true)
	assert.Empty(t, r.Warnings)
	assert.True(t, r.Complete)
	assert.Equal(t, "Checking both.", r.Content)
	require.Len(t, r.ToolCalls, 2)
	assert.Equal(t, "search", r.ToolCalls[0].Function.Name)
	assert.Equal(t, `{"q": "go 1.26", "limit": 5, "ratio": -2.5e3, "exact": true, "after": null}`, r.ToolCalls[0].Function.Arguments)
	assert.Equal(t, "plot", r.ToolCalls[1].Function.Name)
	assert.JSONEq(t, `{"opts":{"w":3,"tags":{"a":[1,2]}},"xs":[1,"two",null]}`, r.ToolCalls[1].Function.Arguments)
	for _, tc := range r.ToolCalls {
		assert.True(t, json.Valid([]byte(tc.Function.Arguments)), tc.Function.Arguments)
	}
	calls, err := ParseToolCalls(genTwoCalls[strings.Index(genTwoCalls, "<|open|>tools"):strings.Index(genTwoCalls, "<|close|>message")])
	require.NoError(t, err)
	assert.Equal(t, r.ToolCalls, calls)
}

// TestParseReplyMarkupInArguments: through ids, argument text that spells
// control tokens, quotes, ampersands and newlines stays the argument's
// text; an attribute's &quot; and &amp; are unescaped.
func TestParseReplyMarkupInArguments(t *testing.T) {
	tok := realIDsTokenizer(t)
	value := "<|open|>x<|sep|> & \"quoted\"\n<|close|>argument<|sep|> </a>"
	var ids []int
	ids = append(ids, tok.EncodeSpecial(`<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>`)...)
	ids = append(ids, tok.EncodeSpecial(`<|open|>call tool="edit" index="1"<|sep|><|open|>argument key="a&amp;b &quot;c&quot;" type="string"<|sep|>`)...)
	ids = append(ids, tok.Encode(value)...)
	ids = append(ids, tok.EncodeSpecial(`<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`)...)
	r := tok.ParseReplyIDs(ids, true)
	assert.Empty(t, r.Warnings)
	require.Len(t, r.ToolCalls, 1)
	var args map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.ToolCalls[0].Function.Arguments), &args))
	assert.Equal(t, map[string]string{`a&b "c"`: value}, args)
}

// TestParseReplyTruncated: a reply cut off by the token cap keeps what was
// written; a tool call cut off is returned as text with a warning.
func TestParseReplyTruncated(t *testing.T) {
	r := ParseReply("half a thou", true)
	assert.Equal(t, Reply{Reasoning: "half a thou"}, r)
	r = ParseReply("done<|close|>think<|sep|><|open|>response<|sep|>the answer so", true)
	assert.Equal(t, Reply{Reasoning: "done", Content: "the answer so"}, r)
	cut := strings.Index(genTwoCalls, `index="2"`)
	r = ParseReply(genTwoCalls[:cut], true)
	assert.Empty(t, r.ToolCalls)
	assert.False(t, r.Complete)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], "tool calls could not be read")
	assert.Equal(t, "Checking both."+genTwoCalls[strings.Index(genTwoCalls, "<|open|>tools"):cut], r.Content)
	_, err := ParseToolCalls(genTwoCalls[strings.Index(genTwoCalls, "<|open|>tools"):cut])
	assert.Error(t, err)
}

func TestParseReplyMalformed(t *testing.T) {
	for _, gen := range []string{
		"<|open|><|sep|>",
		"<|close|>think<|sep|><|open|><|sep|>x",
		"<|close|>think<|sep|><|open|>response<|sep|>a<|close|>response<|sep|><|open|>tools<|sep|><|open|><|sep|><|close|>tools<|sep|>",
		"<|close|>think<|sep|><|open|>response<|sep|>a<|close|>response<|sep|><|open|>tools<|sep|><|open|>call index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
		"<|close|>think<|sep|><|open|>response<|sep|>a<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>junk",
		"<|sep|><|sep|><|close|><|open|>",
	} {
		r := ParseReply(gen, true)
		assert.NotEmpty(t, r.Warnings, gen)
		assert.Empty(t, r.ToolCalls, gen)
		assert.False(t, r.Complete, gen)
	}
	// a typed argument that is not JSON is passed as a string, with a warning
	r := ParseReply(`<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="n" type="number"<|sep|>twelve<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`, false)
	require.Len(t, r.ToolCalls, 0, "tools before the response channel are not a reply")
	r = ParseReply(`<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="n" type="number"<|sep|>twelve<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>`, false)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, `{"n": "twelve"}`, r.ToolCalls[0].Function.Arguments)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], `argument "n" of type "number" is not JSON`)
}

// TestParseReplyRendersBack: an assistant message with tool calls, rendered
// and read back from the generation point, gives the same calls.
func TestParseReplyRendersBack(t *testing.T) {
	msg := Message{Role: "assistant", Content: "ok", ReasoningContent: "hmm", ToolCalls: []ToolCall{
		{ID: "c1", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"s":"x<y>&z","n":1.5,"o":{"k":[true]}}`}},
		{ID: "c2", Type: "function", Function: FunctionCall{Name: "g", Arguments: `{}`}},
	}}
	segs, err := Render([]Message{msg}, nil, RenderOptions{NoGenerationPrompt: true})
	require.NoError(t, err)
	text := Text(segs)
	head := `<|open|>message role="assistant"<|sep|><|open|>think<|sep|>`
	i := strings.Index(text, head)
	require.GreaterOrEqual(t, i, 0)
	r := ParseReply(text[i+len(head):], true)
	assert.Empty(t, r.Warnings)
	assert.True(t, r.Complete)
	assert.Equal(t, "hmm", r.Reasoning)
	assert.Equal(t, "ok", r.Content)
	require.Len(t, r.ToolCalls, 2)
	for k, tc := range r.ToolCalls {
		assert.Equal(t, msg.ToolCalls[k].Function.Name, tc.Function.Name)
		assert.JSONEq(t, msg.ToolCalls[k].Function.Arguments, tc.Function.Arguments)
	}
}

// FuzzParseReplyIDs feeds arbitrary token sequences (two bytes per id over
// a 512-id byte-level vocabulary, so control tokens are frequent): the
// reader never panics, agrees with ParseAssistantIDs whenever that accepts,
// and returns JSON arguments unless it warned.
func FuzzParseReplyIDs(f *testing.F) {
	dir := f.TempDir()
	require.NoError(f, WriteByteLevel(dir, ByteLevelOptions{}))
	tok, err := Load(dir)
	require.NoError(f, err)
	pack := func(ids []int) []byte {
		b := make([]byte, 2*len(ids))
		for i, id := range ids {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(id))
		}
		return b
	}
	for _, s := range []string{genOneCall, genTwoCalls, "<|open|><|sep|>", genTwoCalls[:300], "x<|close|>think<|sep|>[EOS]"} {
		f.Add(pack(tok.EncodeSpecial(s)), true)
	}
	f.Add(pack(tok.EncodeSpecial("a<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")), false)
	f.Fuzz(func(t *testing.T, data []byte, thinking bool) {
		ids := make([]int, len(data)/2)
		for i := range ids {
			ids[i] = int(binary.LittleEndian.Uint16(data[2*i:])) % tok.VocabSize()
		}
		r := tok.ParseReplyIDs(ids, thinking)
		if len(r.Warnings) == 0 {
			for _, tc := range r.ToolCalls {
				if !json.Valid([]byte(tc.Function.Arguments)) {
					t.Fatalf("arguments %q are not JSON and there is no warning", tc.Function.Arguments)
				}
			}
		}
		if a, err := tok.ParseAssistantIDs(ids, thinking); err == nil {
			if a.Reasoning != r.Reasoning || a.Content != r.Content || a.Complete != r.Complete || len(a.ToolCalls) != len(r.ToolCalls) {
				t.Fatalf("strict %+v, lenient %+v", a, r)
			}
		}
	})
}
