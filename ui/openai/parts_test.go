package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMessagePartsRoundTrip: a message with a picture reads its parts in
// order (image_url as an object or a string) and writes them back as the
// array vLLM and SGLang take; a text-only message keeps its string content.
func TestMessagePartsRoundTrip(t *testing.T) {
	var m Message
	require.NoError(t, json.Unmarshal([]byte(`{"role":"user","content":[{"type":"text","text":"a "},`+
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"image_url","image_url":"data:x"},{"type":"text","text":"b"}]}`), &m))
	assert.Equal(t, "user", m.Role)
	assert.Equal(t, Content("a b"), m.Content)
	assert.Equal(t, []ContentPart{{Text: "a "}, {Image: true, ImageURL: "data:image/png;base64,AAAA"}, {Image: true, ImageURL: "data:x"}, {Text: "b"}}, m.Parts)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"user","content":[{"type":"text","text":"a "},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},`+
		`{"type":"image_url","image_url":{"url":"data:x"}},{"type":"text","text":"b"}]}`, string(out))
	var back Message
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, m, back)

	var plain Message
	require.NoError(t, json.Unmarshal([]byte(`{"role":"user","content":[{"type":"text","text":"x"}]}`), &plain))
	assert.Nil(t, plain.Parts)
	out, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"user","content":"x"}`, string(out))
	assert.Error(t, json.Unmarshal([]byte(`{"role":"user","content":[{"type":"image_url"}]}`), &plain))
}
