package cli

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

// structuredRow is one output of tools/openai-conformance/structured.mjs:
// whether the zod schema accepted it.
type structuredRow struct {
	OK     bool   `json:"ok"`
	Finish any    `json:"finish"`
	Calls  *int   `json:"calls"`
	Error  string `json:"error"`
	Value  any    `json:"value"`
}

// TestServeStructuredOutputSDKs drives `k3 serve` on the demo with the
// official clients' structured calls (openai chat.completions.parse and
// responses.parse with zod 4's .int() and bounded numbers, a forced tool
// call whose schema has bounds, @anthropic-ai/sdk's output_config.format,
// and the AI SDK's generateObject when installed): on K3_STRUCTURED_SEEDS
// seeds each (3 by default, to keep the suite fast; the proof runs
// 20), every output is parsed by the client and accepted by the zod
// schema itself.
func TestServeStructuredOutputSDKs(t *testing.T) {
	seeds := 3
	if v, err := strconv.Atoi(os.Getenv("K3_STRUCTURED_SEEDS")); err == nil && v > 0 {
		seeds = v
	}
	clients := fixture.NodeClients(t, "openai", "@anthropic-ai/sdk")
	dir := demoModel(t)
	const key = "structured-key"
	url, stop := startServe(t, dir, "--addr", "127.0.0.1:0", "--api-key", key, "--model-id", "k3-demo",
		"--queue", "0", "--chunk", "16", "--max-tokens", "200", "--keep-alive", "100ms")
	defer stop()

	var got map[string]any
	clients.Run(t, &got, "structured.mjs", "K3_BASE_URL="+url, "K3_API_KEY="+key, "K3_MODEL=k3-demo", fmt.Sprintf("K3_SEEDS=%d", seeds))
	names := []string{"chatParse", "responsesParse", "toolCall", "anthropicParse", "anthropicBounds"}
	if _, skipped := got["aiSdk"].(map[string]any); skipped {
		t.Logf("the AI SDK is not installed: %v", got["aiSdk"])
	} else {
		names = append(names, "aiSdk")
	}
	parallel := 0
	for _, name := range names {
		rows := decodeRows(t, got[name])
		require.Len(t, rows, seeds, name)
		for i, r := range rows {
			assert.True(t, r.OK, "%s seed %d: %s %v", name, i, r.Error, r.Value)
			if r.Calls != nil && *r.Calls > 1 {
				parallel++
			}
		}
	}
	t.Logf("%d seeds; forced tool calls with more than one call: %d", seeds, parallel)
}

func decodeRows(t *testing.T, v any) []structuredRow {
	list, ok := v.([]any)
	require.True(t, ok, "%v", v)
	rows := make([]structuredRow, len(list))
	for i, x := range list {
		m := x.(map[string]any)
		rows[i].OK, _ = m["ok"].(bool)
		rows[i].Error = fmt.Sprint(m["error"])
		rows[i].Value = m["value"]
		if c, ok := m["calls"].(float64); ok {
			n := int(c)
			rows[i].Calls = &n
		}
	}
	return rows
}
