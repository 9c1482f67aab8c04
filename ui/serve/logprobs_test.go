package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lpEntry is a chat or Responses logprobs entry.
type lpEntry struct {
	Token   string    `json:"token"`
	Logprob float64   `json:"logprob"`
	Bytes   []byte    `json:"-"`
	Raw     []int     `json:"bytes"`
	Top     []lpEntry `json:"top_logprobs"`
}

// joined is the text of entries' bytes.
func joined(es []lpEntry) string {
	var b []byte
	for _, e := range es {
		for _, c := range e.Raw {
			b = append(b, byte(c))
		}
	}
	return coerce(string(b))
}

// A streamed chat's chunks carry the logprobs of their tokens: all of them
// together are the reply's as a reply not streamed gives them (the same
// seed), with the same text. The same for a
// streamed completion's legacy logprobs.
func TestLogprobsStreamed(t *testing.T) {
	s, _, _ := start(t, nil)
	req := map[string]any{"model": "k3-demo", "max_tokens": 24, "logprobs": true, "top_logprobs": 2, "seed": 5, "temperature": 1,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "reasoning_effort": "none"}
	_, data := post(t, s, "/v1/chat/completions", req)
	var whole struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct{ Content []lpEntry }
		}
	}
	require.NoError(t, json.Unmarshal(data, &whole), string(data))
	want := whole.Choices[0].Logprobs.Content
	require.NotEmpty(t, want, string(data))

	req["stream"] = true
	resp, evs := streamPost(t, s, req)
	require.Equal(t, 200, resp.StatusCode)
	var got []lpEntry
	var text string
	for _, ev := range evs {
		if ev.data == "" || ev.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta    struct{ Content *string }
				Logprobs *struct{ Content []lpEntry }
			}
		}
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				require.NotNil(t, ch.Logprobs, "a content delta carries logprobs: %s", ev.data)
				text += *ch.Delta.Content
			}
			if ch.Logprobs != nil {
				got = append(got, ch.Logprobs.Content...)
			}
		}
	}
	assert.Equal(t, want, got)
	assert.Equal(t, whole.Choices[0].Message.Content, text)

	creq := map[string]any{"model": "k3-demo", "prompt": "Hello", "max_tokens": 10, "logprobs": 2, "seed": 5, "temperature": 1}
	_, data = post(t, s, "/v1/completions", creq)
	type legacy struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float64            `json:"token_logprobs"`
		TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
	var cw struct {
		Choices []struct {
			Text     string
			Logprobs legacy
		}
	}
	require.NoError(t, json.Unmarshal(data, &cw), string(data))
	creq["stream"] = true
	js, _ := json.Marshal(creq)
	hresp, err := http.Post("http://"+s.Addr()+"/v1/completions", "application/json", strings.NewReader(string(js)))
	require.NoError(t, err)
	defer hresp.Body.Close()
	var all legacy
	text = ""
	for _, ev := range readSSE(t, hresp.Body) {
		if ev.data == "" || ev.data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text     string
				Logprobs *legacy
			}
		}
		require.NoError(t, json.Unmarshal([]byte(ev.data), &c), ev.data)
		for _, ch := range c.Choices {
			text += ch.Text
			require.NotNil(t, ch.Logprobs, ev.data)
			all.Tokens = append(all.Tokens, ch.Logprobs.Tokens...)
			all.TokenLogprobs = append(all.TokenLogprobs, ch.Logprobs.TokenLogprobs...)
			all.TopLogprobs = append(all.TopLogprobs, ch.Logprobs.TopLogprobs...)
			all.TextOffset = append(all.TextOffset, ch.Logprobs.TextOffset...)
		}
	}
	assert.Equal(t, cw.Choices[0].Text, text)
	assert.Equal(t, cw.Choices[0].Logprobs, all)
}

// Responses: include message.output_text.logprobs (with top_logprobs)
// gives the output_text's logprobs, streamed in the output_text deltas
// and whole in its done events, equal to the reply's not streamed;
// without it the lists are empty. Messages refuses logprobs.
func TestLogprobsResponsesAndMessages(t *testing.T) {
	s, _, _ := start(t, nil)
	req := map[string]any{"model": "k3-demo", "max_output_tokens": 24, "input": "hi", "reasoning": map[string]any{"effort": "none"},
		"include": []string{"message.output_text.logprobs"}, "top_logprobs": 3, "temperature": 0}
	_, data := post(t, s, "/v1/responses", req)
	var r struct {
		Output []struct {
			Type    string
			Content []struct {
				Text     string
				Logprobs []lpEntry
			}
		}
	}
	require.NoError(t, json.Unmarshal(data, &r), string(data))
	var want []lpEntry
	var text string
	for _, it := range r.Output {
		if it.Type == "message" {
			want, text = it.Content[0].Logprobs, it.Content[0].Text
		}
	}
	require.NotEmpty(t, want, string(data))
	assert.Equal(t, text, joined(want))
	for _, e := range want {
		require.Len(t, e.Top, 3)
		assert.Equal(t, e.Top[0].Logprob, e.Logprob, "greedy: the pick is the most likely")
	}

	req["stream"] = true
	resp, evs := postEvents(t, s, "/v1/responses", req)
	require.Equal(t, 200, resp.StatusCode)
	var deltas, done []lpEntry
	decode := func(v any) []lpEntry {
		var es []lpEntry
		b, _ := json.Marshal(v)
		require.NoError(t, json.Unmarshal(b, &es))
		return es
	}
	for _, ev := range evs {
		switch ev.name {
		case "response.output_text.delta":
			deltas = append(deltas, decode(ev.data["logprobs"])...)
		case "response.output_text.done":
			done = decode(ev.data["logprobs"])
		}
	}
	assert.Equal(t, want, deltas)
	assert.Equal(t, want, done)

	delete(req, "include")
	delete(req, "top_logprobs")
	delete(req, "stream")
	_, data = post(t, s, "/v1/responses", req)
	require.NoError(t, json.Unmarshal(data, &r), string(data))
	for _, it := range r.Output {
		if it.Type == "message" {
			assert.NotNil(t, it.Content[0].Logprobs)
			assert.Empty(t, it.Content[0].Logprobs)
		}
	}

	for _, f := range []string{"logprobs", "top_logprobs"} {
		resp, data := post(t, s, "/v1/messages", map[string]any{"model": "k3-demo", "max_tokens": 8, f: 2,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}})
		assert.Equal(t, 400, resp.StatusCode, string(data))
		assert.Contains(t, string(data), `"type":"invalid_request_error"`)
		assert.Contains(t, string(data), f+": the Messages API has no log-probabilities")
	}
}
