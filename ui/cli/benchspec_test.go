package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchSpecAcceptance: the acceptance table covers every prompt of the
// fixed set at every length, reproducibly, and the drafter finds nothing to
// copy in the chat reply but accepts drafts in the summary and second turn.
func TestBenchSpecAcceptance(t *testing.T) {
	run := func() []specLine {
		code, stdout, stderr := runK3("bench", "spec", "--acceptance-only", "--json")
		require.Equal(t, ExitOK, code, stderr)
		var lines []specLine
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var sl specLine
			require.NoError(t, json.Unmarshal([]byte(l), &sl), l)
			lines = append(lines, sl)
		}
		return lines
	}
	lines := run()
	require.Len(t, lines, 4*4)
	assert.Equal(t, lines, run())
	perPass := map[string]float64{}
	for _, l := range lines {
		assert.Equal(t, "acceptance", l.Kind)
		assert.LessOrEqual(t, l.Accepted, l.Drafted)
		assert.Equal(t, l.Tokens, l.Passes+1+l.Accepted, "%s spec %s: every pass makes its accepted drafts and one more token", l.Prompt, l.Spec)
		if l.Spec == "8" {
			perPass[l.Prompt] = l.AcceptedPerPass
		}
	}
	assert.Equal(t, 0.0, perPass["chat"])
	assert.Greater(t, perPass["summarise"], 0.5)
	assert.Greater(t, perPass["second turn"], 0.5)
	assert.Greater(t, perPass["code"], 0.1)

	code, _, stderr := runK3("bench", "spec", "--max-draft", "0")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, stderr, "--max-draft must be 1..32")
}
