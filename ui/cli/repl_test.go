package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/tokenizer/constrain"
)

// TestREPLCommands runs the REPL's /commands on a repl directly (no model,
// no session): each changes the turn options it names and says so; a bad
// argument or an unknown command is answered with the list; /exit and
// /quit leave.
func TestREPLCommands(t *testing.T) {
	var out bytes.Buffer
	r := &repl{opt: chat.Options{Thinking: true, Effort: "max"}, stdout: &out, stderr: &out}
	run := func(line string) (bool, string) {
		out.Reset()
		leave := r.command(line)
		return leave, out.String()
	}
	leave, said := run("/think off")
	assert.False(t, leave)
	assert.Equal(t, "thinking off\n", said)
	assert.False(t, r.opt.Thinking)
	_, said = run("/effort low")
	assert.Equal(t, "thinking effort low\n", said)
	assert.Equal(t, "low", r.opt.Effort)
	_, said = run("/json on")
	assert.Equal(t, "answers: any JSON object\n", said)
	assert.Equal(t, constrain.ObjectFormat, r.opt.ResponseFormat)

	schema := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`), 0o644))
	_, said = run("/json " + schema)
	assert.Equal(t, "answers: JSON of the schema in "+schema+"\n", said)
	assert.Contains(t, string(r.opt.ResponseFormat), `"json_schema"`)
	before := r.opt.ResponseFormat
	_, said = run("/json " + filepath.Join(t.TempDir(), "none.json"))
	assert.Contains(t, said, "none.json: cannot be read: ")
	assert.Contains(t, said, "; answers stay as they were\n")
	assert.Equal(t, before, r.opt.ResponseFormat)
	_, said = run("/json off")
	assert.Equal(t, "answers: free text\n", said)
	assert.Nil(t, r.opt.ResponseFormat)

	for _, bad := range []string{"/think maybe", "/effort medium", "/json", "/frobnicate", "/think"} {
		leave, said = run(bad)
		assert.False(t, leave, bad)
		assert.Equal(t, "unknown command \""+bad+"\"\n"+chatHelp, said, bad)
	}
	assert.Equal(t, "low", r.opt.Effort, "a refused command changes nothing")
	_, said = run("/help")
	assert.Equal(t, chatHelp, said)
	for _, q := range []string{"/exit", "/quit"} {
		leave, _ = run(q)
		assert.True(t, leave, q)
	}
}

// TestChatFormat: --json and --json-schema give the response format, not
// both, and a schema that cannot be read is refused by name.
func TestChatFormat(t *testing.T) {
	f, err := chatFormat(false, "")
	require.NoError(t, err)
	assert.Nil(t, f)
	f, err = chatFormat(true, "")
	require.NoError(t, err)
	assert.Equal(t, constrain.ObjectFormat, f)
	_, err = chatFormat(true, "s.json")
	assert.EqualError(t, err, "give --json or --json-schema, not both")
	_, err = chatFormat(false, "/nonexistent/s.json")
	assert.ErrorContains(t, err, "--json-schema /nonexistent/s.json: cannot be read")
}

// TestChatHistorySystem: --system goes into the history file once (saved
// at start), replaces a different one with a note, and the file's lock is
// held until released.
func TestChatHistorySystem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	var out, errs bytes.Buffer
	hist, release, code := chatHistory(path, "Be brief.", &out, &errs)
	require.Equal(t, -1, code, errs.String())
	require.Equal(t, []chat.Message{{Role: "system", Content: "Be brief."}}, hist)
	_, err := chat.LockHistory(path)
	assert.Error(t, err, "the history is locked while the chat runs")
	release()
	saved, err := chat.LoadHistory(path)
	require.NoError(t, err)
	assert.Equal(t, hist, saved)

	out.Reset()
	hist, release, code = chatHistory(path, "Be long.", &out, &errs)
	defer release()
	require.Equal(t, -1, code)
	assert.Equal(t, "Be long.", hist[0].Content)
	assert.Contains(t, out.String(), "--system replaces the system prompt")
}

// TestChatChecks: k3 chat's effort and sampling numbers are refused with
// the flag named.
func TestChatChecks(t *testing.T) {
	_, err := chatChecks("max", 1, 0, 0, 0, false, "")
	require.NoError(t, err)
	_, err = chatChecks("medium", 1, 0, 0, 0, false, "")
	assert.ErrorContains(t, err, `--thinking-effort "medium" is not one of`)
	for _, bad := range []struct {
		gen        int
		temp, topP float64
		topK       int
		msg        string
	}{{0, 0, 0, 0, "--gen 0: the turn cap must be 1 or more tokens"}, {-1, 0, 0, 0, "--gen -1:"},
		{1, -1, 0, 0, "--temperature -1: give 0 (greedy) or more"}, {1, 0, 2, 0, "--top-p 2: give 0..1 (0: off)"},
		{1, 0, -0.1, 0, "--top-p -0.1:"}, {1, 0, 0, -1, "--top-k -1: give 0 (all) or more"}} {
		_, err = chatChecks("low", bad.gen, bad.temp, bad.topP, bad.topK, false, "")
		require.Error(t, err, "%+v", bad)
		assert.True(t, strings.HasPrefix(err.Error(), bad.msg), "%+v: %v", bad, err) // only the flag at fault
	}
	f, err := chatChecks("high", 1, 0.7, 0.9, 40, true, "")
	require.NoError(t, err)
	assert.Equal(t, constrain.ObjectFormat, f)
}
