package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k3/internal/fixture"
	"k3/tokenizer"
)

// The stand-in vocabulary checked against tiktoken by the tokenizer tests.
var tokParityDir = filepath.Join(fixture.Root(), "tokenizer", "testdata", "parity")

func tokRunCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestTokenizeCommand(t *testing.T) {
	tok, err := tokenizer.Load(tokParityDir)
	if err != nil {
		t.Fatal(err)
	}
	text := "Hello <|open|> 漢字 it's"
	for _, special := range []bool{false, true} {
		args := []string{"tokenize", "--tok", tokParityDir, "--text", text}
		want := tok.Encode(text)
		if special {
			args = append(args, "--special")
			want = tok.EncodeSpecial(text)
		}
		code, out, errs := tokRunCmd(args...)
		if code != ExitOK || errs != "" {
			t.Fatalf("code %d: %s", code, errs)
		}
		var got []int
		if err := json.Unmarshal([]byte(out), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("special=%v: %s (want %v)", special, out, want)
		}
	}
	open, _ := tok.SpecialID(tokenizer.Open)
	_, out, _ := tokRunCmd("tokenize", "--tok", tokParityDir, "--text", "<|open|>", "--special")
	if strings.TrimSpace(out) != "["+strconv.Itoa(open)+"]" {
		t.Fatalf("special: %s", out)
	}
	// --file reads raw bytes.
	f := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(f, []byte("a\xffb\n"), 0o644)
	_, out, _ = tokRunCmd("tokenize", "--tok", tokParityDir, "--file", f)
	var ids []int
	json.Unmarshal([]byte(out), &ids)
	if string(tok.Decode(ids)) != "a\xffb\n" {
		t.Fatalf("file: %s", out)
	}
	// Empty text is an empty array, not null.
	_, out, _ = tokRunCmd("tokenize", "--tok", tokParityDir, "--text", "")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("empty: %q", out)
	}
}

func TestTokenizeUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tokenize", "--text", "a"}, "--tok is required"},
		{[]string{"tokenize", "--tok", tokParityDir}, "exactly one of --text and --file"},
		{[]string{"tokenize", "--tok", tokParityDir, "--text", "a", "--file", "b"}, "exactly one of --text and --file"},
		{[]string{"tokenize", "--tok", tokParityDir, "--text", "a", "x"}, `unexpected argument "x"`},
		{[]string{"tokenize", "--nope"}, "not defined: -nope"},
		{[]string{"tokenize", "--tok", "/nonexistent-dir", "--text", "a"}, "no such file"},
		{[]string{"tokenize", "--tok", tokParityDir, "--file", "/nonexistent-file"}, "no such file"},
	} {
		code, out, errs := tokRunCmd(c.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q (want %q)", c.args, code, errs, c.want)
		}
	}
	if code, out, _ := tokRunCmd("tokenize", "-h"); code != ExitOK || !strings.Contains(out, "usage: k3 tokenize") {
		t.Errorf("help: %d %q", code, out)
	}
}
