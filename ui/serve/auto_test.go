package serve

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/tokenizer"
	"k3/tokenizer/constrain"
	"k3/tokenizer/xtml"
)

// leaning stands in for a model that wants to write fixed K3 output: at
// each position its logits are noise with the next token of output far
// ahead (then, past it, the end of the message); where another control
// token is written for it, it goes on after that token's next place in
// output, and where other text is, it still wants its own. Unlike scripted, its
// tokens are picked by the request's sampler, so what the server holds
// the reply to shows.
type leaning struct {
	tok    *tokenizer.Tokenizer
	output string
}

func (g *leaning) Generate(ctx context.Context, ids []int, o chat.PromptOptions, on func(engine.Event)) (*chat.Reply, error) {
	want := g.tok.EncodeSpecial(g.output)
	end := g.tok.StopIDs()
	r := rand.New(rand.NewPCG(uint64(len(ids)), 7))
	logits := make([]float32, g.tok.VocabSize())
	var gen []int
	rep := &chat.Reply{Stop: engine.StopLength}
	at := 0 // the token of output the model wants next
	for len(gen) < o.MaxTokens {
		for i := range logits {
			logits[i] = float32(r.NormFloat64())
		}
		next := end[0]
		if at < len(want) {
			next = want[at]
		}
		logits[next] += 20
		id := logits2id(o.Sampler, len(ids)+len(gen), logits)
		gen = append(gen, id)
		switch k := slices.Index(want[min(at, len(want)):], id); {
		case id == next:
			at++
		case g.tok.IsSpecial(id) && k >= 0: // markup written for it: it goes on from there
			at += k + 1
		}
		if id == end[0] || id == end[1] {
			rep.Stop = engine.StopToken
			break
		}
	}
	rep.IDs = gen
	x := chat.Replay(g.tok, gen, xtml.ReplyOptions{Thinking: o.Thinking, NoTools: o.NoTools, NoToolsWhy: o.NoToolsWhy}, on)
	for i, id := range gen {
		on(engine.Event{Kind: engine.EventToken, Step: i, Token: id})
	}
	rep.Reasoning, rep.Content, rep.ToolCalls, rep.Warnings, rep.ReasoningTokens = x.Reasoning, x.Content, x.ToolCalls, x.Warnings, x.ReasoningTokens
	return rep, nil
}

func logits2id(s engine.Sampler, pos int, logits []float32) int {
	if s != nil {
		return s.Pick(pos, logits)
	}
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return best
}

// badReads is a reply that calls Read twice on its own, neither call as
// its schema says: no file_path, a key it does not have, a negative offset.
const badReads = `I will read it.<|close|>response<|sep|><|open|>tools<|sep|>` +
	`<|open|>call tool="Read" index="1"<|sep|><|open|>json type="object"<|sep|>{"path": "notes.txt", "offset": -5}<|close|>json<|sep|><|close|>call<|sep|>` +
	`<|open|>call tool="Read" index="2"<|sep|><|open|>json type="object"<|sep|>{"limit": 0}<|close|>json<|sep|><|close|>call<|sep|>` +
	`<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>`

// checkRead asserts arguments fit readSchema (independently of the
// compiler): an object with a string file_path, offset >= 0 and limit > 0
// when given, no other key.
func checkRead(t *testing.T, args string) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(args))
	d.UseNumber()
	var v map[string]any
	require.NoError(t, d.Decode(&v), args)
	_, ok := v["file_path"].(string)
	assert.True(t, ok, "file_path: %s", args)
	for k, x := range v {
		switch k {
		case "file_path":
		case "offset", "limit":
			n, err := x.(json.Number).Int64()
			require.NoError(t, err, args)
			assert.True(t, n >= 0 && (k == "offset" || n > 0), args)
		default:
			t.Errorf("key %q is not in the schema: %s", k, args)
		}
	}
}

// Under tool_choice auto, the calls a model opens on its own are held to
// their tools' schemas, every call of the reply, on Chat Completions,
// Responses and Messages; the answer before them is the model's own. (The
// same model without the hold writes both calls as badReads has them.)
func TestAutoCallsHeld(t *testing.T) {
	var g *leaning
	s, _, _ := startWith(t, nil, func(tok *tokenizer.Tokenizer) generator {
		g = &leaning{tok: tok, output: badReads}
		return g
	})
	read := map[string]any{"name": "Read", "description": "Read a file", "parameters": json.RawMessage(readSchema)}
	msgs := []map[string]any{{"role": "user", "content": "read notes.txt"}}

	r := chatReply(t, s, map[string]any{"max_tokens": 600, "reasoning_effort": "none", "messages": msgs,
		"tools": []map[string]any{{"type": "function", "function": read}}})
	c := r.Choices[0]
	assert.Equal(t, "tool_calls", c.FinishReason)
	require.NotNil(t, c.Message.Content)
	assert.Equal(t, "I will read it.", *c.Message.Content)
	require.Len(t, c.Message.ToolCalls, 2, "%+v", r)
	for _, tc := range c.Message.ToolCalls {
		assert.Equal(t, "Read", tc.Function.Name)
		checkRead(t, tc.Function.Arguments)
	}
	assert.Empty(t, r.Warnings)

	resp, data := post(t, s, "/v1/responses", map[string]any{"model": "k3-demo", "max_output_tokens": 600, "input": "read notes.txt",
		"reasoning": map[string]any{"effort": "none"}, "tools": []map[string]any{{"type": "function", "name": "Read", "parameters": json.RawMessage(readSchema)}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	var rr struct {
		Output []struct{ Type, Name, Arguments string }
	}
	require.NoError(t, json.Unmarshal(data, &rr))
	n := 0
	for _, it := range rr.Output {
		if it.Type == "function_call" {
			n++
			assert.Equal(t, "Read", it.Name)
			checkRead(t, it.Arguments)
		}
	}
	assert.Equal(t, 2, n, string(data))

	resp, data = post(t, s, "/v1/messages", map[string]any{"model": "k3-demo", "max_tokens": 600, "messages": msgs,
		"tools": []map[string]any{{"name": "Read", "input_schema": json.RawMessage(readSchema)}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	var m struct {
		Content []struct {
			Type, Name string
			Input      json.RawMessage
		}
		StopReason string `json:"stop_reason"`
	}
	require.NoError(t, json.Unmarshal(data, &m))
	n = 0
	for _, b := range m.Content {
		if b.Type == "tool_use" {
			n++
			assert.Equal(t, "Read", b.Name)
			checkRead(t, string(b.Input))
		}
	}
	assert.Equal(t, 2, n, string(data))
	assert.Equal(t, "tool_use", m.StopReason)
}

// A model that answers and ends its turn under tool_choice auto writes
// what it would unheld (no call opened, no budget kept back), and stop
// strings still apply; a strict tool outside the subset is refused, a
// lenient one warned of.
func TestAutoCallsLazy(t *testing.T) {
	answer := `Just text, and no call at all here.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>`
	var g *leaning
	s, _, _ := startWith(t, nil, func(tok *tokenizer.Tokenizer) generator {
		g = &leaning{tok: tok, output: answer}
		return g
	})
	tool := func(strict bool, schema string) []map[string]any {
		return []map[string]any{{"type": "function", "function": map[string]any{"name": "Read", "strict": strict, "parameters": json.RawMessage(schema)}}}
	}
	req := map[string]any{"max_tokens": 200, "reasoning_effort": "none", "messages": []map[string]any{{"role": "user", "content": "hi"}}, "tools": tool(true, readSchema)}
	r := chatReply(t, s, req)
	require.NotNil(t, r.Choices[0].Message.Content)
	assert.Equal(t, "Just text, and no call at all here.", *r.Choices[0].Message.Content)
	assert.Equal(t, "stop", r.Choices[0].FinishReason)
	assert.Empty(t, r.Choices[0].Message.ToolCalls)

	req["max_tokens"] = 5 // cut by the budget, as unheld: no reserve for a call
	r = chatReply(t, s, req)
	assert.Equal(t, "length", r.Choices[0].FinishReason)
	delete(req, "tools")
	unheld := chatReply(t, s, req)
	assert.Equal(t, *unheld.Choices[0].Message.Content, *r.Choices[0].Message.Content)
	assert.NotEmpty(t, *r.Choices[0].Message.Content)
	req["tools"] = tool(true, readSchema)

	req["max_tokens"], req["stop"] = 200, []string{"no call"}
	r = chatReply(t, s, req)
	assert.Equal(t, "Just text, and ", *r.Choices[0].Message.Content)
	delete(req, "stop")

	odd := `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`
	req["tools"] = tool(true, odd)
	resp, data := post(t, s, "/v1/chat/completions", req)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), "uniqueItems")
	req["tools"] = tool(false, odd)
	r = chatReply(t, s, req)
	assert.Contains(t, strings.Join(r.Warnings, "\n"), "uniqueItems")
}

// A oneOf whose alternatives may overlap: strict, 400 naming oneOf;
// not strict, held as anyOf and said in warnings. One told apart by a
// discriminator is held.
func TestOneOfOverlapRefused(t *testing.T) {
	s, _ := scriptedServer(t, `{"a":1}<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>`)
	overlap := json.RawMessage(`{"oneOf":[{"type":"integer"},{"type":"number","minimum":0}]}`)
	rf := func(strict bool, schema json.RawMessage) map[string]any {
		return map[string]any{"max_tokens": 40, "reasoning_effort": "none", "messages": []map[string]any{{"role": "user", "content": "n?"}},
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n", "strict": strict, "schema": schema}}}
	}
	req := rf(true, overlap)
	req["model"] = "k3-demo"
	resp, data := post(t, s, "/v1/chat/completions", req)
	assert.Equal(t, 400, resp.StatusCode, string(data))
	assert.Contains(t, string(data), `schema keyword \"oneOf\": alternatives 0 and 1 may both fit one value`)
	r := chatReply(t, s, rf(false, overlap))
	assert.Contains(t, strings.Join(r.Warnings, "\n"), `"oneOf"`)
	r = chatReply(t, s, rf(true, json.RawMessage(`{"oneOf":[{"type":"integer"},{"type":"string"}]}`)))
	assert.Empty(t, r.Warnings)
}

// The hold keeps state and says so (engine.Ordered): calls the model may
// open (auto) are held with the job's drafting on (the engine's drafts
// never ask it ahead: TestOrderedSamplerDrafts); a required call is held
// with drafting off.
func TestHeldAutoKeepsDrafting(t *testing.T) {
	_, tok := demo(t)
	j := &job{goal: constrain.Goal{Call: map[string]*constrain.Schema{"f": constrain.AnyObject()}, Auto: true}}
	cs, spec := constrainedSampler(tok, j, nil, engine.SpecAuto)
	require.NotNil(t, cs)
	assert.Equal(t, engine.SpecAuto, spec)
	var o engine.Sampler = cs
	ord, ok := o.(engine.Ordered)
	require.True(t, ok)
	assert.True(t, ord.Ordered())
	j.goal.Auto = false
	_, spec = constrainedSampler(tok, j, nil, engine.SpecAuto)
	assert.Equal(t, engine.SpecOff, spec)
}
