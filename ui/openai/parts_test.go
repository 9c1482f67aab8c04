package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMessagePartsRoundTrip: a message with a picture reads its parts in
// order (image_url as an object or a string) and writes them back as the
// array vLLM and SGLang take; so do text parts alone; a string content
// stays a string.
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

	// text parts alone are parts too: Moonshot's encoder tokenizes each as
	// its own segment; a string content is no parts
	var plain Message
	require.NoError(t, json.Unmarshal([]byte(`{"role":"user","content":[{"type":"text","text":"x "},{"type":"text","text":"y"}]}`), &plain))
	assert.Equal(t, []ContentPart{{Text: "x "}, {Text: "y"}}, plain.Parts)
	assert.Equal(t, Content("x y"), plain.Content)
	out, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"user","content":[{"type":"text","text":"x "},{"type":"text","text":"y"}]}`, string(out))
	require.NoError(t, json.Unmarshal([]byte(`{"role":"user","content":"x"}`), &plain))
	assert.Nil(t, plain.Parts)
	out, err = json.Marshal(plain)
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"user","content":"x"}`, string(out))
	assert.Error(t, json.Unmarshal([]byte(`{"role":"user","content":[{"type":"image_url"}]}`), &plain))
}
