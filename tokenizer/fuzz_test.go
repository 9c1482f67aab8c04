package tokenizer

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseModel: the rank-file parser never panics, and what it accepts
// is dense, duplicate-free and survives a write/parse round trip.
func FuzzParseModel(f *testing.F) {
	f.Add([]byte(byteModel("YWI= 256")))
	f.Add([]byte("IQ== 0\r\n\nIg== 1\n"))
	f.Add([]byte("IQ== 1\nIg== 0"))
	f.Add([]byte("IQ== 0\nIQ== 1\n"))
	f.Add([]byte("!!!! 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := ParseModel(bytes.NewReader(data))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		var sb strings.Builder
		for r, tok := range toks {
			if len(tok) == 0 || seen[string(tok)] {
				t.Fatalf("rank %d: empty or duplicate token", r)
			}
			seen[string(tok)] = true
			sb.WriteString(b64(tok) + " " + itoa(r) + "\n")
		}
		again, err := ParseModel(strings.NewReader(sb.String()))
		if err != nil || len(again) != len(toks) {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

// FuzzParseConfig: the config parser never panics and returns 256
// distinct, non-empty names when it accepts.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"added_tokens_decoder":{"258":{"content":"<|end_of_msg|>","special":true}}}`), 256)
	f.Add([]byte(`{"added_tokens_decoder":{"257":{"content":"a"},"257":{"content":"b"}}}`), 256)
	f.Add([]byte(`{}`), 163584)
	f.Add([]byte(`{"added_tokens_decoder":{"1":{"content":"<|reserved_token_2|>"}}}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, numBase int) {
		if numBase < 0 || numBase > 1<<24 {
			return
		}
		names, err := ParseConfig(data, numBase)
		if err != nil {
			return
		}
		if len(names) != NumSpecial {
			t.Fatalf("%d names", len(names))
		}
		seen := map[string]bool{}
		for _, n := range names {
			if n == "" || seen[n] {
				t.Fatalf("empty or duplicate name %q", n)
			}
			seen[n] = true
		}
	})
}

// FuzzRoundTrip: for any bytes, both encode modes decode back exactly, the
// pieces cover the text, and ordinary encoding never yields a special id.
func FuzzRoundTrip(f *testing.F) {
	tok, _ := loadParity(f)
	for _, s := range []string{"", "Hello world", "it'S 漢字テスト  \n\n x", "<|open|>[EOS]", "\xff\xfe\xe6\xbc", "a                b", "👨‍👩‍👧‍👦 \u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if string(tok.Decode(ids)) != s {
			t.Fatalf("ordinary round trip of %q", s)
		}
		for _, id := range ids {
			if tok.IsSpecial(id) {
				t.Fatalf("special id %d from ordinary text %q", id, s)
			}
		}
		if string(tok.Decode(tok.EncodeSpecial(s))) != s {
			t.Fatalf("special round trip of %q", s)
		}
		if strings.Join(Pretokenize(s), "") != s {
			t.Fatalf("pieces do not cover %q", s)
		}
		d := tok.NewStreamDecoder()
		var sb strings.Builder
		for _, id := range ids {
			sb.WriteString(d.Add(id))
		}
		sb.WriteString(d.Flush())
		if sb.String() != s {
			t.Fatalf("stream decode of %q", s)
		}
	})
}
