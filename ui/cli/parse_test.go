package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k3/internal/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type parseResult struct {
	ReasoningContent *string `json:"reasoning_content"`
	Content          *string `json:"content"`
	ToolCalls        []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
	Warnings []string `json:"warnings"`
}

func runParseCmd(t *testing.T, text string, args ...string) (int, parseResult, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "out.txt")
	require.NoError(t, os.WriteFile(f, []byte(text), 0o644))
	code, out, errs := tokRunCmd(append([]string{"parse", "--tok", fixture.ModelDir("demo"), "--text-file", f}, args...)...)
	var r parseResult
	if code == ExitOK {
		require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	}
	return code, r, errs
}

// TestParseCommand: k3 parse reads a model's output on the demo tokenizer
// as the server does: reasoning, answer, tool calls, warnings; no tools
// declared or tool_choice none leave the calls out.
func TestParseCommand(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.json")
	require.NoError(t, os.WriteFile(tools, []byte(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`), 0o644))
	out := `Need the weather.<|close|>think<|sep|><|open|>response<|sep|>Checking.<|close|>response<|sep|>` +
		`<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|><|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|><|close|>call<|sep|>` +
		`<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`

	code, r, errs := runParseCmd(t, out, "--tools", tools)
	require.Equal(t, ExitOK, code, errs)
	require.NotNil(t, r.ReasoningContent)
	assert.Equal(t, "Need the weather.", *r.ReasoningContent)
	require.NotNil(t, r.Content)
	assert.Equal(t, "Checking.", *r.Content)
	require.Len(t, r.ToolCalls, 1)
	assert.Equal(t, "get_weather", r.ToolCalls[0].Name)
	assert.Equal(t, `{"city": "Oslo"}`, r.ToolCalls[0].Arguments)
	assert.Equal(t, []string{}, r.Warnings)

	// tool_choice none, and no tools: the call is left out, with a warning
	code, r, _ = runParseCmd(t, out, "--tools", tools, "--tool-choice", "none")
	require.Equal(t, ExitOK, code)
	assert.Empty(t, r.ToolCalls)
	assert.Equal(t, []string{`the model wrote 1 tool call(s) but tool_choice is "none"; they were left out`}, r.Warnings)
	code, r, _ = runParseCmd(t, out)
	require.Equal(t, ExitOK, code)
	assert.Empty(t, r.ToolCalls)
	assert.Equal(t, []string{`the model wrote 1 tool call(s) but no tools were declared; they were left out`}, r.Warnings)

	// thinking off, cut at a tag: no markup, null reasoning
	code, r, _ = runParseCmd(t, "the answer<|close|>response", "--no-think")
	require.Equal(t, ExitOK, code)
	assert.Nil(t, r.ReasoningContent)
	require.NotNil(t, r.Content)
	assert.Equal(t, "the answer", *r.Content)
	assert.Equal(t, []string{"the output ends inside a tag (cut off?); the unfinished tag was left out"}, r.Warnings)

	// nothing written: nulls and empty lists
	code, r, _ = runParseCmd(t, "")
	require.Equal(t, ExitOK, code)
	assert.Equal(t, parseResult{ToolCalls: r.ToolCalls, Warnings: []string{}}, r)
	assert.NotNil(t, r.ToolCalls)

	// refused input
	for _, args := range [][]string{{"--tool-choice", "sometimes"}, {"--tool-choice", "required"}, {"--tools", filepath.Join(dir, "missing.json")}} {
		code, _, errs = runParseCmd(t, out, args...)
		assert.Equal(t, ExitUsage, code, args)
		assert.Contains(t, errs, "k3 parse: ", args)
	}
	code, _, errs = tokRunCmd("parse", "--tok", fixture.ModelDir("demo"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "--text-file is required")
}

// Markup is read as markup however long the input (the fault audit's K3:
// past 5,000 unknown tags, control tokens were split into text), and the
// input is read a piece at a time (pieces end before a "<|").
func TestParseLongMarkup(t *testing.T) {
	for _, n := range []int{5000, 70000} {
		text := "<|open|>response<|sep|>" + strings.Repeat("<|open|>x<|sep|>", n) + "<|close|>response<|sep|>"
		code, r, errs := runParseCmd(t, text, "--no-think")
		require.Equal(t, ExitOK, code, errs)
		if r.Content != nil {
			assert.NotContains(t, *r.Content, "<|", "n=%d", n)
			assert.NotContains(t, *r.Content, "|>", "n=%d", n)
		}
		assert.Contains(t, strings.Join(r.Warnings, "\n"), `an unexpected tag "x" was left out`)
	}
	// text and markup across piece boundaries: the same reply as one piece
	// (thinking off: the prompt opened the response channel)
	long := strings.Repeat("héllo wörld ", parsePiece/6) + "<|close|>response<|sep|><|close|>message<|sep|>"
	code, r, errs := runParseCmd(t, long, "--no-think")
	require.Equal(t, ExitOK, code, errs)
	require.NotNil(t, r.Content)
	assert.Equal(t, strings.Repeat("héllo wörld ", parsePiece/6), *r.Content)
	assert.Empty(t, r.Warnings)
}

func TestSafeCut(t *testing.T) {
	assert.Equal(t, 3, safeCut([]byte("abc<|op")))
	assert.Equal(t, 11, safeCut([]byte("abc<|open|>")))
	assert.Equal(t, 1, safeCut([]byte("a\xc3")), "not inside a UTF-8 sequence")
	far := append([]byte("<|"), make([]byte, 200)...)
	assert.Equal(t, len(far), safeCut(far), "a <| far back holds nothing back")
}
