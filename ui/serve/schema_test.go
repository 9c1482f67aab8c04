package serve

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readSchema is Claude Code's Read tool: bounds on both integers
// (zod's .int() bound, an exclusive minimum) and file_path required.
const readSchema = `{"type":"object","properties":{"file_path":{"type":"string"},
 "offset":{"type":"integer","minimum":0,"maximum":9007199254740991},
 "limit":{"type":"integer","exclusiveMinimum":0,"maximum":9007199254740991}},
 "required":["file_path"],"additionalProperties":false}`

// A forced call of a tool whose schema has bounds is held to it, every
// call of the reply (the review's Claude Code Read: no file_path came
// back), strict or not; parallel_tool_calls false gives one call.
func TestToolSchemaWithBoundsHeld(t *testing.T) {
	s, _, _ := start(t, nil)
	for seed := range 4 {
		for _, strict := range []bool{false, true} {
			req := map[string]any{"model": "k3-demo", "max_tokens": 160, "seed": seed, "temperature": 1, "reasoning_effort": "none",
				"messages":    []map[string]any{{"role": "user", "content": "read notes.txt"}},
				"tools":       []map[string]any{{"type": "function", "function": map[string]any{"name": "Read", "strict": strict, "parameters": json.RawMessage(readSchema)}}},
				"tool_choice": "required", "parallel_tool_calls": seed%2 == 0}
			_, data := post(t, s, "/v1/chat/completions", req)
			r := decodeChat(t, data)
			calls := r.Choices[0].Message.ToolCalls
			require.NotEmpty(t, calls, string(data))
			if seed%2 == 0 {
				assert.Len(t, calls, 1)
			}
			assert.Empty(t, r.Warnings, string(data))
			for _, c := range calls {
				var v map[string]json.Number
				d := json.NewDecoder(strings.NewReader(c.Function.Arguments))
				d.UseNumber()
				var raw map[string]any
				require.NoError(t, d.Decode(&raw), c.Function.Arguments)
				_, ok := raw["file_path"].(string)
				assert.True(t, ok, "file_path: %s", c.Function.Arguments)
				v = map[string]json.Number{}
				for k, x := range raw {
					if n, ok := x.(json.Number); ok {
						v[k] = n
					}
				}
				if n, ok := v["offset"]; ok {
					i, err := n.Int64()
					require.NoError(t, err, c.Function.Arguments)
					assert.True(t, i >= 0 && i <= 9007199254740991, c.Function.Arguments)
				}
				if n, ok := v["limit"]; ok {
					i, err := n.Int64()
					require.NoError(t, err, c.Function.Arguments)
					assert.True(t, i > 0 && i <= 9007199254740991, c.Function.Arguments)
				}
			}
		}
	}
}

// Outside the subset: strict is refused naming the keyword; not strict,
// the rest is held and the warnings say what was not.
func TestSchemaOutsideSubset(t *testing.T) {
	s, _, _ := start(t, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"uniqueItems":true}},"required":["tags"],"additionalProperties":false}`)
	tool := func(strict bool) []map[string]any {
		return []map[string]any{{"type": "function", "function": map[string]any{"name": "tag", "strict": strict, "parameters": schema}}}
	}
	base := func() map[string]any {
		return map[string]any{"model": "k3-demo", "max_tokens": 120, "reasoning_effort": "none",
			"messages": []map[string]any{{"role": "user", "content": "tags?"}}}
	}
	req := base()
	req["tools"], req["tool_choice"] = tool(true), "required"
	resp, data := post(t, s, "/v1/chat/completions", req)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), `uniqueItems`)

	req["tools"] = tool(false)
	resp, data = post(t, s, "/v1/chat/completions", req)
	require.Equal(t, 200, resp.StatusCode, string(data))
	r := decodeChat(t, data)
	assert.Contains(t, strings.Join(r.Warnings, "\n"), `tool "tag" parameters: property "tags": schema keyword "uniqueItems" is not supported; it was not enforced`)
	var v struct{ Tags []string }
	require.NoError(t, json.Unmarshal([]byte(r.Choices[0].Message.ToolCalls[0].Function.Arguments), &v))

	req = base()
	req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": schema}}
	resp, data = post(t, s, "/v1/chat/completions", req)
	require.Equal(t, 200, resp.StatusCode, string(data))
	r = decodeChat(t, data)
	assert.Contains(t, strings.Join(r.Warnings, "\n"), `response_format.json_schema.schema: property "tags": schema keyword "uniqueItems"`)
	require.NotNil(t, r.Choices[0].Message.Content)
	require.NoError(t, json.Unmarshal([]byte(*r.Choices[0].Message.Content), &v), *r.Choices[0].Message.Content)
}

// Anthropic's output_config.format (and the beta's output_format) is held
// like a strict response_format, or refused with Anthropic's error shape.
func TestMessagesOutputFormat(t *testing.T) {
	s, _, _ := start(t, nil)
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},"day":{"type":"string","format":"date"}},"required":["n","day"],"additionalProperties":false}`)
	for _, field := range []string{"output_config", "output_format"} {
		format := map[string]any{"type": "json_schema", "schema": schema}
		req := map[string]any{"model": "k3-demo", "max_tokens": 80, "messages": []map[string]any{{"role": "user", "content": "n?"}}}
		if field == "output_config" {
			req[field] = map[string]any{"format": format}
		} else {
			req[field] = format
		}
		resp, data := post(t, s, "/v1/messages", req)
		require.Equal(t, 200, resp.StatusCode, string(data))
		var m struct {
			Content []struct{ Type, Text string }
		}
		require.NoError(t, json.Unmarshal(data, &m))
		var text string
		for _, b := range m.Content {
			if b.Type == "text" {
				text += b.Text
			}
		}
		var v struct {
			N   int
			Day string
		}
		require.NoError(t, json.Unmarshal([]byte(text), &v), "%s: %s", field, data)
		assert.True(t, v.N >= 1 && v.N <= 9, text)
		assert.Regexp(t, `^\d{4}-\d{2}-\d{2}$`, v.Day)
	}
	req := map[string]any{"model": "k3-demo", "max_tokens": 80, "messages": []map[string]any{{"role": "user", "content": "n?"}},
		"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{"type": "array", "uniqueItems": true}}}}
	resp, data := post(t, s, "/v1/messages", req)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), `"type":"invalid_request_error"`)
	assert.Contains(t, string(data), "uniqueItems")
}

// The fields agents read of /v1/models, and /tokenize and /detokenize.
func TestModelFieldsAndTokenize(t *testing.T) {
	s, _, tok := start(t, func(o *Options) { o.MaxContext = 4096 })
	_, data := get(t, s, "/v1/models")
	var list struct {
		Data []struct {
			ID             string `json:"id"`
			MaxModelLen    int    `json:"max_model_len"`
			ContextLength  int    `json:"context_length"`
			MaxInputTokens int    `json:"max_input_tokens"`
			Type           string `json:"type"`
			DisplayName    string `json:"display_name"`
			CreatedAt      string `json:"created_at"`
		} `json:"data"`
		HasMore bool   `json:"has_more"`
		FirstID string `json:"first_id"`
	}
	require.NoError(t, json.Unmarshal(data, &list), string(data))
	c := list.Data[0]
	assert.Equal(t, [3]int{4096, 4096, 4096}, [3]int{c.MaxModelLen, c.ContextLength, c.MaxInputTokens})
	assert.Equal(t, "model", c.Type)
	assert.Equal(t, "k3-demo", c.DisplayName)
	assert.Regexp(t, `^\d{4}-\d{2}-\d{2}T`, c.CreatedAt)
	assert.Equal(t, "k3-demo", list.FirstID)

	text := "Hello wörld, <|open|> stays text"
	_, data = post(t, s, "/tokenize", map[string]any{"content": text})
	var tk struct {
		Tokens      []int `json:"tokens"`
		Count       int   `json:"count"`
		MaxModelLen int   `json:"max_model_len"`
	}
	require.NoError(t, json.Unmarshal(data, &tk), string(data))
	assert.Equal(t, tok.Encode(text), tk.Tokens)
	assert.Equal(t, len(tk.Tokens), tk.Count)
	assert.Equal(t, 4096, tk.MaxModelLen)
	_, data = post(t, s, "/detokenize", map[string]any{"tokens": tk.Tokens})
	var dt struct{ Content string }
	require.NoError(t, json.Unmarshal(data, &dt), string(data))
	assert.Equal(t, text, dt.Content)
	_, data = post(t, s, "/v1/tokenize", map[string]any{"prompt": "ab", "with_pieces": true})
	assert.Contains(t, string(data), `"piece"`)
	resp, data := post(t, s, "/detokenize", map[string]any{"tokens": []int{-1}})
	assert.Equal(t, 400, resp.StatusCode, string(data))
	resp, _ = post(t, s, "/tokenize", map[string]any{})
	assert.Equal(t, 400, resp.StatusCode)
}

// logit_bias and the penalties change the pick exactly, or are refused.
func TestPenaltiesApplied(t *testing.T) {
	s, _, tok := start(t, nil)
	a := tok.Encode("A")
	require.Len(t, a, 1)
	req := map[string]any{"model": "k3-demo", "prompt": "x", "max_tokens": 6, "temperature": 0,
		"logit_bias": map[string]float64{fmt.Sprint(a[0]): 100}}
	_, data := post(t, s, "/v1/completions", req)
	var r struct {
		Choices []struct{ Text string }
	}
	require.NoError(t, json.Unmarshal(data, &r), string(data))
	assert.Equal(t, "AAAAAA", r.Choices[0].Text, "a +100 bias wins every position")

	// a presence penalty larger than the bias's lead: A once, then never again
	req["presence_penalty"] = 2
	req["logit_bias"] = map[string]float64{fmt.Sprint(a[0]): 100}
	req["frequency_penalty"] = 2
	req["repetition_penalty"] = 100
	_, data = post(t, s, "/v1/completions", req)
	require.NoError(t, json.Unmarshal(data, &r), string(data))
	require.NotEmpty(t, r.Choices[0].Text, string(data))
	assert.Equal(t, "A", r.Choices[0].Text[:1])
	assert.NotContains(t, r.Choices[0].Text[1:], "A", "repetition_penalty 100 divides A's logit after its first pick")

	for _, bad := range []map[string]any{{"frequency_penalty": 3}, {"presence_penalty": -2.5}, {"repetition_penalty": 0},
		{"logit_bias": map[string]float64{"x": 1}}, {"logit_bias": map[string]float64{"99999999": 1}}, {"logit_bias": map[string]float64{"1": 101}}} {
		q := map[string]any{"model": "k3-demo", "prompt": "x", "max_tokens": 2}
		for k, v := range bad {
			q[k] = v
		}
		resp, data := post(t, s, "/v1/completions", q)
		assert.Equal(t, 400, resp.StatusCode, "%v: %s", bad, data)
	}
}

// Bad input the fault audit sent: refused with 400.
func TestBadAgentInput(t *testing.T) {
	s, _, _ := start(t, nil)
	resp, data := post(t, s, "/v1/responses", `{"model":"k3-demo","input":null}`)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), "input is required")
	resp, data = post(t, s, "/v1/messages", map[string]any{"model": "k3-demo", "max_tokens": 8,
		"messages": []map[string]any{{"role": "user", "content": "hi"}},
		"thinking": map[string]any{"type": "enabled", "budget_tokens": -7}})
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), "budget_tokens")
}

// logprobs on Chat Completions and Completions: one entry per content
// token, whose bytes make the text; greedy picks the top alternative; the
// alternatives are in descending order and are log-probabilities.
func TestLogprobs(t *testing.T) {
	s, _, _ := start(t, nil)
	_, data := post(t, s, "/v1/completions", map[string]any{"model": "k3-demo", "prompt": "Hello", "max_tokens": 8, "logprobs": 3})
	var c struct {
		Choices []struct {
			Text     string
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(data, &c), string(data))
	lp := c.Choices[0].Logprobs
	require.NotEmpty(t, lp.Tokens, string(data))
	assert.Equal(t, coerce(strings.Join(lp.Tokens, "")), c.Choices[0].Text)
	for i, l := range lp.TokenLogprobs {
		assert.LessOrEqual(t, l, 0.0)
		assert.LessOrEqual(t, len(lp.TopLogprobs[i]), 3)
		for _, v := range lp.TopLogprobs[i] {
			assert.GreaterOrEqual(t, l, v, "greedy: the pick is the most likely")
		}
	}

	req := map[string]any{"model": "k3-demo", "max_tokens": 24, "logprobs": true, "top_logprobs": 2, "seed": 3, "temperature": 1,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "reasoning_effort": "none"}
	_, data = post(t, s, "/v1/chat/completions", req)
	var ch struct {
		Choices []struct {
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					Token   string
					Logprob float64
					Bytes   []byte
					Top     []struct{ Logprob float64 } `json:"top_logprobs"`
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(data, &ch), string(data))
	var all []byte
	for _, e := range ch.Choices[0].Logprobs.Content {
		all = append(all, e.Bytes...)
		require.Len(t, e.Top, 2)
		assert.GreaterOrEqual(t, e.Top[0].Logprob, e.Top[1].Logprob)
		assert.LessOrEqual(t, e.Logprob, e.Top[0].Logprob)
	}
	assert.Equal(t, ch.Choices[0].Message.Content, coerce(string(all)), string(data))

	req["top_logprobs"] = 21
	resp, _ := post(t, s, "/v1/chat/completions", req)
	assert.Equal(t, 400, resp.StatusCode)
}

// With tool_choice auto the calls are held (TestAutoCallsHeld) and also
// checked against their tools' schemas: a call that does not fit (here
// from a generator that ignores the sampler) is warned of.
func TestAutoCallsChecked(t *testing.T) {
	bad := `x<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>` +
		`<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>` +
		`<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|><|close|>call<|sep|>` +
		`<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`
	for _, c := range []struct {
		output string
		warned bool
	}{{toolOutput, false}, {bad, true}} {
		s, _ := scriptedServer(t, c.output)
		_, data := post(t, s, "/v1/chat/completions", toolRequest(false))
		r := decodeChat(t, data)
		require.NotEmpty(t, r.Choices[0].Message.ToolCalls, string(data))
		w := strings.Join(r.Warnings, "\n")
		assert.Equal(t, c.warned, strings.Contains(w, `the call of "get_weather" has arguments that do not fit its schema`), w)
	}
}
