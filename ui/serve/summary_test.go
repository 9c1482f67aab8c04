package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResponsesReasoningSummary: with reasoning.summary (or its older
// name generate_summary) the reasoning item carries the thinking as its one
// summary_text part too, streamed as reasoning_summary events in order
// (part added, text deltas, text done, part done) inside the item; the
// response echoes the summary asked for. Without it the summary is empty
// and no summary event is sent; an unknown value is refused.
func TestResponsesReasoningSummary(t *testing.T) {
	s, _, _ := start(t, nil)
	body := map[string]any{"model": "k3-demo", "input": "Hello there", "reasoning": map[string]any{"effort": "high", "summary": "auto"}}
	resp, data := post(t, s, "/v1/responses", body)
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := obj(t, data)
	assert.Equal(t, map[string]any{"effort": "high", "summary": "auto"}, r["reasoning"])
	out := items(r)
	require.Equal(t, "reasoning", out[0]["type"])
	thinking := partText(out[0])
	require.NotEmpty(t, thinking, "the demo model thinks first")
	assert.Equal(t, []any{map[string]any{"type": "summary_text", "text": thinking}}, out[0]["summary"])

	// streamed
	body["stream"] = true
	_, evs := postEvents(t, s, "/v1/responses", body)
	var names []string
	var summary strings.Builder
	itemID := ""
	for i, ev := range evs {
		assert.EqualValues(t, i, ev.data["sequence_number"])
		if !strings.Contains(ev.name, "reasoning_summary") {
			if ev.name == "response.output_item.added" && itemID == "" {
				itemID = ev.data["item"].(map[string]any)["id"].(string)
			}
			names = append(names, ev.name)
			continue
		}
		names = append(names, ev.name)
		assert.Equal(t, itemID, ev.data["item_id"], ev.name)
		assert.EqualValues(t, 0, ev.data["summary_index"], ev.name)
		assert.EqualValues(t, 0, ev.data["output_index"], ev.name)
		switch ev.name {
		case "response.reasoning_summary_part.added":
			assert.Equal(t, map[string]any{"type": "summary_text", "text": ""}, ev.data["part"])
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.data["delta"].(string))
		case "response.reasoning_summary_text.done":
			assert.Equal(t, thinking, ev.data["text"])
		case "response.reasoning_summary_part.done":
			assert.Equal(t, map[string]any{"type": "summary_text", "text": thinking}, ev.data["part"])
		}
	}
	assert.Equal(t, thinking, summary.String())
	require.GreaterOrEqual(t, len(names), 5)
	assert.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.reasoning_summary_part.added", "response.content_part.added"}, names[:5])
	idx := func(n string) int {
		for i, x := range names {
			if x == n {
				return i
			}
		}
		t.Fatalf("no %s in %v", n, names)
		return -1
	}
	assert.Less(t, idx("response.reasoning_summary_text.delta"), idx("response.reasoning_summary_text.done"))
	assert.Less(t, idx("response.reasoning_summary_text.done"), idx("response.reasoning_summary_part.done"))
	assert.Less(t, idx("response.reasoning_summary_part.done"), idx("response.output_item.done"))
	final := evs[len(evs)-1].data["response"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"type": "summary_text", "text": thinking}}, items(final)[0]["summary"])

	// the older name
	body = map[string]any{"model": "k3-demo", "input": "Hello there", "reasoning": map[string]any{"effort": "high", "generate_summary": "concise"}}
	_, data = post(t, s, "/v1/responses", body)
	r = obj(t, data)
	assert.Equal(t, []any{map[string]any{"type": "summary_text", "text": thinking}}, items(r)[0]["summary"])
	assert.Equal(t, "concise", r["reasoning"].(map[string]any)["summary"])

	// not asked: an empty summary, no summary events
	body = map[string]any{"model": "k3-demo", "input": "Hello there", "stream": true}
	_, evs = postEvents(t, s, "/v1/responses", body)
	for _, ev := range evs {
		assert.NotContains(t, ev.name, "reasoning_summary")
	}
	final = evs[len(evs)-1].data["response"].(map[string]any)
	assert.Equal(t, []any{}, items(final)[0]["summary"])
	assert.Nil(t, final["reasoning"].(map[string]any)["summary"])

	// refused
	body = map[string]any{"model": "k3-demo", "input": "Hello there", "reasoning": map[string]any{"summary": "short"}}
	resp, data = post(t, s, "/v1/responses", body)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(data), `reasoning.summary \"short\" is not one of auto, concise, detailed`)
}
