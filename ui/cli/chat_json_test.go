package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/internal/fixture"
)

// chatAnswers runs k3 chat on the demo model with the messages as input
// and returns the assistant answers the history file kept.
func chatAnswers(t *testing.T, dir string, input string, args ...string) []string {
	t.Helper()
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	stdin = strings.NewReader(input)
	defer func() { stdin = nil }()
	code, out, errs := runK3(append([]string{"chat", dir, "--history", hist}, args...)...)
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	h, err := chat.LoadHistory(hist)
	require.NoError(t, err)
	var answers []string
	for _, m := range h {
		if m.Role == "assistant" {
			answers = append(answers, m.Content)
		}
	}
	return answers
}

// On the demo model (random weights: left alone it writes no JSON), every
// answer of k3 chat --json-schema parses and fits the schema: greedy and
// seeded, thinking on and off; greedy gives the same answers twice.
func TestChatJSONSchemaEnforced(t *testing.T) {
	dir := demoModel(t)
	schema := filepath.Join(t.TempDir(), "person.json")
	require.NoError(t, os.WriteFile(schema, []byte(fixture.PersonTagsSchema), 0o644))
	n := 0
	for _, think := range []string{"--no-think=true", "--no-think=false"} {
		for _, sampling := range [][]string{{"--greedy"}, {"--seed", "1"}, {"--seed", "7", "--temperature", "1.5"}} {
			args := append([]string{"--json-schema", schema, "--gen", "80", think}, sampling...)
			answers := chatAnswers(t, dir, "who?\nand you?\n", args...)
			require.Len(t, answers, 2, args)
			for _, a := range answers {
				fixture.CheckPerson(t, a, true)
				n++
			}
			if sampling[0] == "--greedy" {
				assert.Equal(t, answers, chatAnswers(t, dir, "who?\nand you?\n", args...), "greedy is deterministic")
			}
		}
	}
	assert.Equal(t, 12, n)
}

// --json holds answers to a JSON object; /json off frees them, /json FILE
// holds them to a schema, /json on back to any object.
func TestChatJSONToggle(t *testing.T) {
	dir := demoModel(t)
	schema := filepath.Join(t.TempDir(), "person.json")
	require.NoError(t, os.WriteFile(schema, []byte(fixture.PersonTagsSchema), 0o644))
	answers := chatAnswers(t, dir, "one\n/json off\ntwo\n/json "+schema+"\nthree\n/json on\nfour\n/json nothere.json\nfive\n",
		"--json", "--gen", "60", "--no-think")
	require.Len(t, answers, 5)
	for _, i := range []int{0, 3, 4} {
		var v map[string]any
		require.NoError(t, json.Unmarshal([]byte(answers[i]), &v), "answer %d %q", i, answers[i])
	}
	assert.False(t, json.Valid([]byte(answers[1])), "free answer %q", answers[1])
	fixture.CheckPerson(t, answers[2], true)
}

// A schema file that cannot be read, is not JSON or is outside the
// enforced subset is refused with one line, exit 2, before the model is
// opened; so are both flags at once.
func TestChatJSONSchemaRefused(t *testing.T) {
	dir := demoModel(t)
	tmp := t.TempDir()
	notJSON := filepath.Join(tmp, "bad.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("{type: object"), 0o644))
	unique := filepath.Join(tmp, "unique.json")
	require.NoError(t, os.WriteFile(unique, []byte(`{"type":"array","uniqueItems":true}`), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json-schema", filepath.Join(tmp, "none.json")}, "none.json: cannot be read: no such file or directory"},
		{[]string{"--json-schema", notJSON}, "bad.json: is not JSON"},
		{[]string{"--json-schema", unique}, "unique.json: the schema cannot be enforced: "},
		{[]string{"--json", "--json-schema", unique}, "give --json or --json-schema, not both"},
	} {
		stdin = strings.NewReader("hi\n")
		code, out, errs := runK3(append([]string{"chat", dir}, c.args...)...)
		stdin = nil
		assert.Equal(t, ExitUsage, code, c.args)
		assert.Contains(t, errs, c.want)
		assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
		assert.NotContains(t, out, "type a message", "refused before the model opens")
	}
}
