package gui

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// N4: a JSON answer (Answers: JSON) is shown as code, pretty-printed, not
// as Markdown (its indented lines became a code block, the rest text); a
// reply that only starts with a bracket stays text.
func TestJSONAnswerIsCode(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant", Content: `{"saying":"Time flies.","tags":["time","flight"]}`}, &copied)
	require.Len(t, v.body.Objects, 1)
	code := findCode(v.body.Objects[0])
	require.NotNil(t, code, "not drawn as code")
	// one segment a line (String joins them without the line ends)
	assert.Equal(t, `{  "saying": "Time flies.",  "tags": [    "time",    "flight"  ]}`, code.String())
	assert.GreaterOrEqual(t, len(code.Segments), 7, "not one line a value")
	assert.NotNil(t, findLabelContaining(v.body.Objects[0], "JSON"), "no language label")

	// streamed: code from the first brace, pretty once whole
	s := newMV(chat.Message{Role: "assistant"}, &copied)
	s.StartStream(time.Now())
	s.Append("", `{"a": [1,`)
	require.NotNil(t, findCode(s.body.Objects[0]))
	assert.Equal(t, `{"a": [1,`, findCode(s.body.Objects[0]).String())
	s.Append("", ` 2]}`)
	s.SetFinal(chat.Message{Role: "assistant", Content: `{"a": [1, 2]}`})
	assert.Equal(t, `{  "a": [    1,    2  ]}`, findCode(s.body.Objects[0]).String())

	for _, text := range []string{"[in brackets] is how you write it.", "{curly} braces are text too"} {
		m := newMV(chat.Message{Role: "assistant", Content: text}, &copied)
		assert.Nil(t, findCode(m.body.Objects[0]), text)
	}
}
