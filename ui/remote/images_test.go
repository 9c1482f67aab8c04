package remote

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// TestRequestSendsPictures: a user message's pictures go to the server as
// image_url parts with data: URLs before its text, the form vLLM and
// SGLang take.
func TestRequestSendsPictures(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nrest")
	var c Client
	q := c.request([]chat.Message{{Role: "user", Content: "what is it?", Images: [][]byte{png}}}, chat.Options{})
	b, err := json.Marshal(q.Messages)
	require.NoError(t, err)
	s := string(b)
	assert.True(t, strings.Contains(s, `{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgpyZXN0"}}`), s)
	assert.Less(t, strings.Index(s, "image_url"), strings.Index(s, "what is it?"))
	b, err = json.Marshal(c.request([]chat.Message{{Role: "user", Content: "hi"}}, chat.Options{}).Messages)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"content":"hi"`)
}

// TestRequestSendsContentParts: a history message kept as text parts
// (chat.Message.Parts) goes to the server as those parts, so the server
// tokenizes each as its own segment as the first turn did.
func TestRequestSendsContentParts(t *testing.T) {
	var c Client
	b, err := json.Marshal(c.request([]chat.Message{{Role: "user", Content: "first part second part", Parts: []string{"first part ", "second part"}}}, chat.Options{}).Messages)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"content":[{"type":"text","text":"first part "},{"type":"text","text":"second part"}]`)
}
