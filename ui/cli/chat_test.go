package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/internal/demomodel"
)

func demoModel(t *testing.T) string { t.Helper(); return demomodel.Dir(t) }

func TestChatREPL(t *testing.T) {
	dir := demoModel(t)
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	stdin = strings.NewReader("/help\n/think off\nhello\n/effort low\n/think on\nagain\n/bogus\n/exit\n")
	defer func() { stdin = nil }()
	code, out, errs := runK3("chat", dir, "--gen", "6", "--history", hist, "--chunk", "8")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"commands:", "thinking off", "thinking effort low", "[turn cap of 6 tokens reached; the reply is kept]",
		"[thinking]", "unknown command \"/bogus\"", "prompt positions reused"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	h, err := chat.LoadHistory(hist)
	if err != nil || len(h) != 4 || h[0].Content != "hello" || h[2].Content != "again" || h[3].Cut != "turn cap" {
		t.Fatalf("history %+v %v", h, err)
	}
	// the history is picked up again
	stdin = strings.NewReader("/exit\n")
	code, out, _ = runK3("chat", dir, "--history", hist)
	if code != ExitOK || !strings.Contains(out, "history: 4 messages") {
		t.Fatalf("reload: %d\n%s", code, out)
	}
}

func TestChatErrors(t *testing.T) {
	dir := demoModel(t)
	stdin = strings.NewReader("")
	defer func() { stdin = nil }()
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	writeFile(t, bad, "{\"role\":\"user\",\"content\":\"x\"}\nnot json\n")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"chat"}, "exactly one MODEL_DIR"},
		{[]string{"chat", dir, "--thinking-effort", "medium"}, `"medium" is not one of`},
		{[]string{"chat", dir, "--history", bad}, "line 2"},
		{[]string{"chat", t.TempDir()}, "tokenizer"},
		{[]string{"chat", dir, "--top-p", "2"}, "k3 chat: --top-p 2: give 0..1"},
	} {
		code, _, errs := runK3(c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", c.args, code, errs, c.msg)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Audit D1 (row 7.5): a second chat on a history another k3 holds is refused
// before it reads a line, naming the file; the holder's turns stay.
func TestChatRefusesAHistoryInUse(t *testing.T) {
	dir := demoModel(t)
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	held, err := chat.LockHistory(hist)
	require.NoError(t, err)
	require.NoError(t, chat.SaveHistory(hist, []chat.Message{{Role: "user", Content: "A's turn"}, {Role: "assistant", Content: "ok"}}))
	stdin = strings.NewReader("B's turn\n")
	defer func() { stdin = nil }()
	code, _, errs := runK3("chat", dir, "--gen", "2", "--history", hist)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, hist+" is in use by another k3")
	h, err := chat.LoadHistory(hist)
	require.NoError(t, err)
	assert.Equal(t, "A's turn", h[0].Content)
	assert.Len(t, h, 2)

	held.Release()
	stdin = strings.NewReader("B's turn\n")
	code, _, errs = runK3("chat", dir, "--gen", "2", "--history", hist, "--chunk", "8")
	require.Equal(t, ExitOK, code, errs)
	h, err = chat.LoadHistory(hist)
	require.NoError(t, err)
	require.Len(t, h, 4)
	assert.Equal(t, "A's turn", h[0].Content)
	assert.Equal(t, "B's turn", h[2].Content)
}

// TestChatPlanGrows: k3 chat plans the KV cache for the conversation it
// holds and a turn (no longer 8192 positions more whatever it holds), and
// plans again, checked against the memory available, when a turn may take
// the conversation past it: in steps of 4096 positions, so once here.
func TestChatPlanGrows(t *testing.T) {
	dir := demoModel(t)
	stdin = strings.NewReader("hello\nagain\n/exit\n")
	defer func() { stdin = nil }()
	code, out, errs := runK3("chat", dir, "--gen", "6", "--chunk", "8")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, 1, strings.Count(errs, "note: memory plan: the conversation may reach 4096 positions: the KV cache grows by "), errs)
	assert.Equal(t, 2, strings.Count(out, "prompt positions reused"), "both turns ran")
}
