package serve

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// TestContentPartsTokenizedPerPart: a message whose content is an array of
// text parts is tokenized part by part, as Moonshot's encoder
// (build_chat_segments: each text part its own segment) does: "first part "
// + "second part" gives "part", " ", "second", not "part", " second" as
// the joined text does. On the chat completions endpoint (the Responses
// and Anthropic endpoints render through it), with a tokenizer whose
// merges tell the two apart.
func TestContentPartsTokenizedPerPart(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join(fixture.Root(), "tokenizer", "testdata", "parity"))
	require.NoError(t, err)
	render := func(m xtml.Message) []int {
		segs, err := xtml.Render([]xtml.Message{m}, nil, xtml.RenderOptions{})
		require.NoError(t, err)
		return xtml.Encode(tok, segs)
	}
	want := render(xtml.Message{Role: "user", Parts: []xtml.Part{{Text: "first part "}, {Text: "second part"}}})
	joined := render(xtml.Message{Role: "user", Content: "first part second part"})
	require.NotEqual(t, joined, want, "this tokenizer tells the two apart")
	assert.Subset(t, want, append(tok.Encode(" "), tok.Encode("second")...))

	var q openai.ChatRequest
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","messages":[{"role":"user","content":[`+
		`{"type":"text","text":"first part "},{"type":"text","text":"second part"}]}]}`), &q))
	assert.Equal(t, "first part second part", string(q.Messages[0].Content))
	s := &Server{o: Options{Tok: tok}}
	j := &job{}
	require.Nil(t, s.chatPrompt(&q, j))
	assert.Equal(t, want, j.ids)

	// a string content is one segment, as before
	require.NoError(t, json.Unmarshal([]byte(`{"model":"m","messages":[{"role":"user","content":"first part second part"}]}`), &q))
	require.Nil(t, s.chatPrompt(&q, j))
	assert.Equal(t, joined, j.ids)
}
