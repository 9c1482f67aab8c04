package xtml

import (
	"encoding/binary"
	"encoding/json"
	"k3/tokenizer"
	"strings"
	"testing"

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

// FuzzReplyReader feeds arbitrary token sequences (two bytes per id over
// a 512-id byte-level vocabulary, so control tokens are frequent): the
// reader never panics, its events are its reply, no control string
// reaches the text, and arguments are JSON unless it warned.
func FuzzReplyReader(f *testing.F) {
	dir := f.TempDir()
	require.NoError(f, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
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
		rd := NewReplyReader(tok, ReplyOptions{Thinking: thinking})
		var reasoning, content strings.Builder
		var calls []ToolCall
		on := func(evs []ReplyEvent) {
			for _, ev := range evs {
				switch ev.Kind {
				case ReplyReasoning:
					reasoning.WriteString(ev.Text)
				case ReplyContent:
					content.WriteString(ev.Text)
				case ReplyToolEnd:
					calls = append(calls, ev.Call)
				}
			}
		}
		for _, id := range ids {
			on(rd.Add(id))
		}
		on(rd.Finish())
		r := rd.Reply()
		if reasoning.String() != r.Reasoning || content.String() != r.Content || len(calls) != len(r.ToolCalls) {
			t.Fatalf("events differ from the reply %+v", r)
		}
		for _, c := range []string{tokenizer.Open, tokenizer.Close, tokenizer.Sep, tokenizer.EndOfMsg, tokenizer.EOS} {
			if strings.Contains(r.Reasoning, c) || strings.Contains(r.Content, c) {
				t.Fatalf("markup in the text: %+v", r)
			}
		}
		if len(r.Warnings) == 0 {
			for _, tc := range r.ToolCalls {
				if !json.Valid([]byte(tc.Function.Arguments)) {
					t.Fatalf("arguments %q are not JSON and there is no warning", tc.Function.Arguments)
				}
			}
		}
	})
}
