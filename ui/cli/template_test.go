package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k3/internal/fixture"
	"k3/tokenizer"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tokTemplateOut struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func TestTemplateCommand(t *testing.T) {
	tok, err := tokenizer.Load(tokParityDir)
	if err != nil {
		t.Fatal(err)
	}
	xtmlCase := fixture.Path("kimi-k3/xtml/multi_turn_history.json")
	var fx struct {
		Text string `json:"text"`
	}
	data, _ := os.ReadFile(xtmlCase)
	json.Unmarshal(data, &fx)
	// The fixture file is an object with "messages" (and other keys).
	code, out, errs := tokRunCmd("template", "--tok", tokParityDir, "--messages", xtmlCase)
	if code != ExitOK {
		t.Fatalf("code %d: %s", code, errs)
	}
	var got tokTemplateOut
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != fx.Text {
		t.Fatalf("text differs from the fixture:\n%s", got.Text)
	}
	if string(tok.Decode(got.IDs)) != got.Text {
		t.Fatal("ids do not decode to the text")
	}
	open, _ := tok.SpecialID(tokenizer.Open)
	if got.IDs[0] != open {
		t.Fatalf("first id %d, want <|open|> %d (no BOS)", got.IDs[0], open)
	}

	// A bare array, no-think, no generation prompt, effort.
	f := filepath.Join(t.TempDir(), "m.json")
	os.WriteFile(f, []byte(`[{"role":"user","content":"hi <|end_of_msg|>"}]`), 0o644)
	_, out, _ = tokRunCmd("template", "--tok", tokParityDir, "--messages", f, "--no-think", "--no-generation-prompt")
	json.Unmarshal([]byte(out), &got)
	if got.Text != `<|open|>message role="user"<|sep|>hi <|end_of_msg|><|close|>message<|sep|><|end_of_msg|>` {
		t.Fatalf("%q", got.Text)
	}
	eom, _ := tok.SpecialID(tokenizer.EndOfMsg)
	n := 0
	for _, id := range got.IDs {
		if id == eom {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("user text injected a control id: %d end_of_msg ids", n)
	}
	_, out, _ = tokRunCmd("template", "--tok", tokParityDir, "--messages", f, "--thinking-effort", "low")
	json.Unmarshal([]byte(out), &got)
	if !strings.Contains(got.Text, "`thinking_effort=low`") || !strings.HasSuffix(got.Text, "<|open|>think<|sep|>") {
		t.Fatalf("%q", got.Text)
	}
}

func TestTemplateUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`[{"role":"user","content":"hi"}]`), 0o644)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	noChat := t.TempDir() // a vocabulary without K3's chat tokens
	os.WriteFile(filepath.Join(noChat, tokenizer.ModelFile), tokMustRead(t, filepath.Join(tokParityDir, tokenizer.ModelFile)), 0o644)
	os.WriteFile(filepath.Join(noChat, tokenizer.ConfigFile), []byte(`{}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"template", "--messages", good}, "--tok is required"},
		{[]string{"template", "--tok", tokParityDir}, "--messages is required"},
		{[]string{"template", "--tok", tokParityDir, "--messages", good, "--no-think", "--thinking-effort", "low"}, "needs thinking on"},
		{[]string{"template", "--tok", tokParityDir, "--messages", good, "--thinking-effort", "medium"}, `"medium" is not one of`},
		{[]string{"template", "--tok", tokParityDir, "--messages", write("bad.json", "{")}, "unexpected end of JSON"},
		{[]string{"template", "--tok", tokParityDir, "--messages", write("empty.json", "[]")}, "no messages"},
		{[]string{"template", "--tok", tokParityDir, "--messages", write("role.json", `[{"role":"robot","content":"x"}]`)}, `unknown role "robot"`},
		{[]string{"template", "--tok", tokParityDir, "--messages", write("norole.json", `[{"content":"x"}]`)}, "has no role"},
		{[]string{"template", "--tok", noChat, "--messages", good}, "not a K3 chat vocabulary"},
		{[]string{"template", "--tok", tokParityDir, "--messages", filepath.Join(dir, "missing.json")}, "no such file"},
	} {
		code, out, errs := tokRunCmd(c.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q (want %q)", c.args[1:], code, errs, c.want)
		}
	}
}

func tokMustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChatCommandsRefuseNonChatTokenizer: chat and serve check the
// vocabulary has the chat format's tokens before they open the model, with
// one line naming what is missing.
func TestChatCommandsRefuseNonChatTokenizer(t *testing.T) {
	noChat := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(noChat, tokenizer.ModelFile), tokMustRead(t, filepath.Join(tokParityDir, tokenizer.ModelFile)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(noChat, tokenizer.ConfigFile), []byte(`{}`), 0o644))
	model := fixture.ModelDir("tiny-release")
	for _, cmd := range []string{"chat", "serve"} {
		code, out, errs := tokRunCmd(cmd, model, "--tok", noChat)
		assert.Equal(t, ExitUsage, code, cmd)
		assert.Empty(t, out, cmd)
		assert.Equal(t, "k3 "+cmd+": tokenizer: special token [EOS] missing; not a K3 chat vocabulary\n", errs, cmd)
	}
	code, _, errs := tokRunCmd("chat", model, "--tok", t.TempDir())
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "k3 chat: tokenizer: ")
}
