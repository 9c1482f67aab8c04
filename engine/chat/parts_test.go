package chat

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// TestHistoryKeepsContentParts: a message whose content came as text parts
// keeps them in the history (the file, and so the app's saved
// conversations) and every later turn renders them part by part, as
// Moonshot's encoder does (build_chat_segments): "first part " + "second
// part" gives "part", " ", "second", where the joined text gives "part",
// " second". A history whose parts do not make its content is refused; a
// content edited without its parts renders the content.
func TestHistoryKeepsContentParts(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join(fixture.Root(), "tokenizer", "testdata", "parity"))
	require.NoError(t, err)
	line := `{"role":"user","content":"first part second part","parts":["first part ","second part"]}` + "\n"
	h, err := ParseHistory([]byte(line))
	require.NoError(t, err)
	require.Len(t, h, 1)
	assert.Equal(t, []string{"first part ", "second part"}, h[0].Parts)
	out, err := EncodeHistory(h)
	require.NoError(t, err)
	assert.Equal(t, line, string(out), "saved as read")

	render := func(m xtml.Message) []int {
		segs, err := xtml.Render([]xtml.Message{m}, nil, xtml.RenderOptions{NoThink: true})
		require.NoError(t, err)
		return xtml.Encode(tok, segs)
	}
	want := render(xtml.Message{Role: "user", Parts: []xtml.Part{{Text: "first part "}, {Text: "second part"}}})
	joined := render(xtml.Message{Role: "user", Content: "first part second part"})
	require.NotEqual(t, joined, want, "this tokenizer tells the two apart")
	s := &Session{Tok: tok}
	got, _, err := s.render(h, Options{}, false)
	require.NoError(t, err)
	assert.Equal(t, want, got, "a later turn renders the parts")

	edited := h[0]
	edited.Content = "first part second part!"
	got, _, err = s.render([]Message{edited}, Options{}, false)
	require.NoError(t, err)
	assert.Equal(t, render(xtml.Message{Role: "user", Content: edited.Content}), got)

	for _, bad := range []string{
		`{"role":"user","content":"first part second part","parts":["first part","second part"]}`,
		`{"role":"user","content":"","parts":[]}`,
	} {
		_, err := ParseHistory([]byte(bad))
		assert.ErrorContains(t, err, "parts must be the content's text parts", bad)
	}
}
