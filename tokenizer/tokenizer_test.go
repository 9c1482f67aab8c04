package tokenizer

import (
	"bytes"
	"encoding/json"
	"k3/internal/fixture"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPins checks the eight real splits from Moonshot's tokenizer.
func TestPins(t *testing.T) {
	data, err := os.ReadFile(fixture.Path("kimi-k3/pretokenize_pins.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pins []struct {
		Text   string   `json:"text"`
		Pieces []string `json:"pieces"`
	}
	if err := json.Unmarshal(data, &pins); err != nil {
		t.Fatal(err)
	}
	if len(pins) != 8 {
		t.Fatalf("%d pins", len(pins))
	}
	for _, p := range pins {
		if got := Pretokenize(p.Text); !reflect.DeepEqual(got, p.Pieces) {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, got, p.Pieces)
		}
	}
}

func TestPretokenizeCases(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"IT'S it'ſ don'T", []string{"IT'S", " it'ſ", " don'T"}},
		{"テスト漢字テスト", []string{"テスト", "漢字", "テスト"}},
		{"  x", []string{" ", " x"}},
		{"a \n\n  b", []string{"a", " \n\n", " ", " b"}},
		{"x  ", []string{"x", "  "}},
		{"1234567", []string{"123", "456", "7"}},
		{"\u0301abc", []string{"\u0301abc"}},
		{"..\r\n\r\nx", []string{"..\r\n\r\n", "x"}},
		{"a\xffb\xfe", []string{"a", "\xffb", "\xfe"}}, // an invalid byte is a symbol: a prefix for "b"
		{"\x1c\x1c", []string{"\x1c\x1c"}},
	} {
		if got := Pretokenize(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q want %q", c.in, got, c.want)
		}
	}
}

// TestLongInputChunks checks the 400,000-character windows and the
// 25,000-character run split by hand-computed piece boundaries.
func TestLongInputChunks(t *testing.T) {
	var chunks []string
	collect := func(s string) { chunks = append(chunks, s) }
	s := strings.Repeat("é", 25001)
	chunks = nil
	forEachChunk(s, bmpTable(), collect)
	if len(chunks) != 2 || utf8.RuneCountInString(chunks[0]) != 25000 || chunks[1] != "é" {
		t.Fatalf("run split: %d chunks", len(chunks))
	}
	// U+001C is Python whitespace (isspace) but not regex \s.
	s = "ab" + strings.Repeat("\x1c", 25000) + "cd"
	chunks = nil
	forEachChunk(s, bmpTable(), collect)
	if len(chunks) != 1 {
		t.Fatalf("%d chunks for a 25,000 run", len(chunks))
	}
	s = strings.Repeat("ab ", 140000) // 420,000 chars, runs of 2 and 1
	chunks = nil
	forEachChunk(s, bmpTable(), collect)
	if len(chunks) != 2 || len(chunks[0]) != 400000 || len(chunks[1]) != 20000 {
		t.Fatalf("windows: %d chunks", len(chunks))
	}
	// A whitespace run cut at a window: the lookahead sees the chunk end.
	s = strings.Repeat("x", 24999) + " " + strings.Repeat(" ", 25001) + "y"
	p := Pretokenize(s)
	// The space run (25,002) is cut after 25,000; the first chunk ends in
	// spaces, so alternative 7 keeps all 25,000 of them (end of text).
	if p[len(p)-3] != strings.Repeat(" ", 25000) || p[len(p)-2] != " " || p[len(p)-1] != " y" {
		t.Fatalf("tail pieces %q", p[len(p)-3:])
	}
}

func writeFiles(t *testing.T, model, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ModelFile), []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func byteModel(extra ...string) string {
	var b strings.Builder
	toks := ByteLevelTokens("", 0)
	for r, tok := range toks {
		b.WriteString(b64(tok) + " " + itoa(r) + "\n")
	}
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	return b.String()
}

func TestParseModelErrors(t *testing.T) {
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"YWI="}, "line 257: want \"base64 rank\""},
		{[]string{"YWI= x"}, "line 257: rank"},
		{[]string{"YWI= -1"}, "line 257: rank"},
		{[]string{"YW*= 256"}, "line 257: bad base64"},
		{[]string{"YWI 256"}, "line 257: bad base64"},
		{[]string{"YWI= 256", "YWI= 257"}, "line 258: duplicate token"},
		{[]string{"YWI= 255"}, "line 257: duplicate rank 255"},
		{[]string{"YWI= 300"}, "line 257: rank 300 outside 0..256"},
		{[]string{" 256"}, "line 257: empty token"},
	} {
		_, err := ParseModel(strings.NewReader(byteModel(c.extra...)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.extra, err, c.want)
		}
	}
	if _, err := ParseModel(strings.NewReader("\n\n")); err == nil {
		t.Error("empty model accepted")
	}
	// CRLF and blank lines are fine.
	toks, err := ParseModel(strings.NewReader(strings.ReplaceAll(byteModel("YWI= 256"), "\n", "\r\n\n")))
	if err != nil || len(toks) != 257 || string(toks[256]) != "ab" {
		t.Fatalf("%v %d", err, len(toks))
	}
	// Missing single byte.
	m := byteModel()
	m = m[strings.Index(m, "\n")+1:] // drop rank 0 ('!')
	m = strings.Replace(m, " 255\n", " 0\n", 1)
	if _, err := Load(writeFiles(t, m, `{}`)); err == nil || !strings.Contains(err.Error(), "0x21") {
		t.Fatalf("missing byte: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	names, err := ParseConfig([]byte(`{"added_tokens_decoder":{"258":{"content":"<|end_of_msg|>","special":true}},"x":1}`), 256)
	if err != nil {
		t.Fatal(err)
	}
	if names[2] != "<|end_of_msg|>" || names[0] != "<|reserved_token_256|>" || names[255] != "<|reserved_token_511|>" {
		t.Fatalf("names %q %q %q", names[0], names[2], names[255])
	}
	for _, c := range []struct{ cfg, want string }{
		{`[]`, "not a JSON object"},
		{`{"added_tokens_decoder":[]}`, "want an object"},
		{`{"added_tokens_decoder":{"255":{"content":"a"}}}`, "outside the special range"},
		{`{"added_tokens_decoder":{"512":{"content":"a"}}}`, "outside the special range"},
		{`{"added_tokens_decoder":{"0257":{"content":"a"}}}`, "not a decimal id"},
		{`{"added_tokens_decoder":{"257":{"content":""}}}`, "missing or empty"},
		{`{"added_tokens_decoder":{"257":{}}}`, "missing or empty"},
		{`{"added_tokens_decoder":{"257":{"content":"a"},"257":{"content":"b"}}}`, "given twice"},
		{`{"added_tokens_decoder":{"257":{"content":"a"},"258":{"content":"a"}}}`, "used by ids 257 and 258"},
		{`{"added_tokens_decoder":{"257":{"content":"<|reserved_token_300|>"}}}`, "used by ids 257 and 300"},
	} {
		_, err := ParseConfig([]byte(c.cfg), 256)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestK3Names checks the loader against the real K3 special-token table.
func TestK3Names(t *testing.T) {
	data, err := os.ReadFile(fixture.Path("kimi-k3/control_tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ct struct {
		Base  int               `json:"base"`
		Names map[string]string `json:"names"`
	}
	if err := json.Unmarshal(data, &ct); err != nil {
		t.Fatal(err)
	}
	tok := realIDsTokenizer(t)
	if tok.NumBase() != ct.Base || tok.VocabSize() != 163840 || len(ct.Names) != 256 {
		t.Fatalf("NumBase %d VocabSize %d", tok.NumBase(), tok.VocabSize())
	}
	for k, name := range ct.Names {
		id, _ := json.Number(k).Int64()
		if got := tok.SpecialName(int(id)); got != name {
			t.Errorf("id %s: %q want %q", k, got, name)
		}
		if got, ok := tok.SpecialID(name); !ok || got != int(id) {
			t.Errorf("SpecialID(%q) = %d", name, got)
		}
	}
	if !reflect.DeepEqual(tok.StopIDs(), []int{163586, 163585}) {
		t.Fatalf("StopIDs %v", tok.StopIDs())
	}
	if tok.IsSpecial(163583) || !tok.IsSpecial(163584) || !tok.IsSpecial(163839) || tok.IsSpecial(163840) {
		t.Fatal("IsSpecial range")
	}
}

func TestWriteByteLevel(t *testing.T) {
	dir := t.TempDir()
	if err := WriteByteLevel(dir, ByteLevelOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.NumBase() != 256 || tok.VocabSize() != 512 || tok.CheckChat() != nil {
		t.Fatalf("NumBase %d %v", tok.NumBase(), tok.CheckChat())
	}
	if ids := tok.Encode(`"!`); !reflect.DeepEqual(ids, []int{1, 0}) {
		t.Fatalf("byte ranks: %v", ids)
	}
	eom, _ := tok.SpecialID(EndOfMsg)
	if eom != 258 || tok.SpecialName(256+9) != "[EOT]" || tok.SpecialName(256+8) != "<|reserved_token_264|>" {
		t.Fatal("special layout")
	}
	text := strings.Repeat("the cat sat on the mat; the cat is fat. ", 50)
	dir2 := t.TempDir()
	if err := WriteByteLevel(dir2, ByteLevelOptions{Text: text, Merges: 40}); err != nil {
		t.Fatal(err)
	}
	tok2, err := Load(dir2)
	if err != nil {
		t.Fatal(err)
	}
	// Training stops once every distinct piece is one token.
	if tok2.NumBase() <= 256 || tok2.NumBase() > 296 {
		t.Fatalf("NumBase %d", tok2.NumBase())
	}
	for _, w := range []string{"the", " cat", " sat", " on", " the", " mat", " is", " fat"} {
		if ids := tok2.Encode(w); len(ids) != 1 {
			t.Errorf("%q: %d ids", w, len(ids))
		}
	}
	if n1, n2 := len(tok.Encode(text)), len(tok2.Encode(text)); n2*3 > n1 {
		t.Fatalf("merges do not compress: %d vs %d ids", n2, n1)
	}
	if string(tok2.Decode(tok2.Encode(text))) != text {
		t.Fatal("round trip")
	}
	// Deterministic output.
	dir3 := t.TempDir()
	_ = WriteByteLevel(dir3, ByteLevelOptions{Text: text, Merges: 40})
	a, _ := os.ReadFile(filepath.Join(dir2, ModelFile))
	b, _ := os.ReadFile(filepath.Join(dir3, ModelFile))
	if !bytes.Equal(a, b) {
		t.Fatal("not deterministic")
	}
	if err := WriteByteLevel(t.TempDir(), ByteLevelOptions{Text: text, Merges: 40, NumBase: 100}); err == nil {
		t.Fatal("NumBase below learned size accepted")
	}
}

// TestRoundTripRandom: random bytes (mostly invalid UTF-8), random runes and
// long inputs round-trip exactly in both modes.
func TestRoundTripRandom(t *testing.T) {
	tok, _ := loadParity(t)
	rng := rand.New(rand.NewSource(1))
	check := func(s string) {
		t.Helper()
		if got := tok.Decode(tok.Encode(s)); string(got) != s {
			t.Fatalf("ordinary round trip failed on %d bytes", len(s))
		}
		if got := tok.Decode(tok.EncodeSpecial(s)); string(got) != s {
			t.Fatalf("special round trip failed on %d bytes", len(s))
		}
	}
	for i := 0; i < 300; i++ {
		b := make([]byte, rng.Intn(300))
		rng.Read(b)
		check(string(b))
	}
	runes := []rune("aZ 0\n\r\t'sé漢テ한Жא٣👍\u0301\u00a0\u3000<|>[]")
	for i := 0; i < 300; i++ {
		var sb strings.Builder
		for k := rng.Intn(200); k > 0; k-- {
			sb.WriteRune(runes[rng.Intn(len(runes))])
		}
		check(sb.String())
	}
	big := make([]byte, 3<<20)
	rng.Read(big)
	check(string(big))
	check(strings.Repeat("\xe6\xbc", 300000) + strings.Repeat(" ", 60000) + "<|open|>")
}

// TestBPELargeMatchesSmall: the heap BPE used for long pieces gives the
// same result as the array scan on every piece size.
func TestBPELargeMatchesSmall(t *testing.T) {
	tok, _ := loadParity(t)
	rng := rand.New(rand.NewSource(2))
	alphabet := []string{"a", "b", "e", "th", "in", " ", "er", "an", "ing", "é", "的"}
	for i := 0; i < 2000; i++ {
		var sb strings.Builder
		for k := 2 + rng.Intn(60); k > 0; k-- {
			sb.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		p := sb.String()
		if len(p) > smallPiece {
			p = p[:smallPiece]
		}
		var scratch []bpePart
		a := tok.bpeSmall(p, nil, &scratch)
		b := tok.bpeLarge(p, nil)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q: small %v large %v", p, a, b)
		}
	}
	// A long piece still merges completely (O(n log n) path).
	long := strings.Repeat("a", 200000)
	ids := tok.Encode(long)
	if string(tok.Decode(ids)) != long || len(ids) > 200000/4 {
		t.Fatalf("%d ids for 200,000 a's", len(ids))
	}
}

func TestStreamDecoder(t *testing.T) {
	tok, _ := loadParity(t)
	text := "Hello 漢字テスト 👨‍👩‍👧‍👦 안녕 é\xff\xe6\xbc end \xe6"
	ids := tok.Encode(text)
	d := tok.NewStreamDecoder()
	var out strings.Builder
	for _, id := range ids {
		s := d.Add(id)
		// Every emitted chunk ends on a character boundary unless the
		// stream itself is invalid there.
		if s != "" && !utf8.ValidString(s) && !strings.ContainsRune(s, utf8.RuneError) && !strings.Contains(s, "\xff") {
			t.Fatalf("emitted partial character %q", s)
		}
		out.WriteString(s)
	}
	tail := d.Flush()
	if tail != "\xe6" {
		t.Fatalf("flush %q", tail)
	}
	out.WriteString(tail)
	if out.String() != text {
		t.Fatalf("stream %q", out.String())
	}
	// Byte by byte through single-byte ids: a 4-byte emoji is held back
	// until complete.
	d = tok.NewStreamDecoder()
	var got []string
	for _, c := range []byte("👍x") {
		got = append(got, d.Add(tok.byteRank[c]))
	}
	if !reflect.DeepEqual(got, []string{"", "", "", "👍", "x"}) {
		t.Fatalf("%q", got)
	}
}

func TestDecodeSpecialAndInvalid(t *testing.T) {
	tok := realIDsTokenizer(t)
	ids := tok.EncodeSpecial("a<|open|>b")
	if len(ids) != 3 || ids[1] != 163587 {
		t.Fatalf("%v", ids)
	}
	if got := string(tok.Decode(append(ids, -1, 1<<30))); got != "a<|open|>b" {
		t.Fatalf("%q", got)
	}
	// Encode leaves the marker as text.
	for _, id := range tok.Encode("a<|open|>b") {
		if tok.IsSpecial(id) {
			t.Fatal("ordinary Encode produced a special id")
		}
	}
	// Earliest, then longest special wins.
	if ids := tok.EncodeSpecial("[EOS][EOT]"); !reflect.DeepEqual(ids, []int{163585, 163593}) {
		t.Fatalf("%v", ids)
	}
}

// BenchmarkEncode reports MB/s of ordinary encoding on the multilingual
// parity corpus (the stand-in vocabulary).
func BenchmarkEncode(b *testing.B) {
	tok, pf := loadParity(b)
	var sb strings.Builder
	for _, c := range pf.Cases {
		if c.Text != nil {
			sb.WriteString(*c.Text)
		}
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}
