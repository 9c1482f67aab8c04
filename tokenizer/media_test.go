package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestImagePromptAndExpand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteByteLevel(dir, ByteLevelOptions{Text: "image", Merges: 4}))
	tok, err := Load(dir)
	require.NoError(t, err)
	pad, err := tok.MediaPadID()
	require.NoError(t, err)
	assert.Equal(t, "<|media_begin|>image 640x427<|media_content|><|media_pad|><|media_end|>", ImagePrompt(640, 427))
	ids := tok.EncodeSpecial("a" + ImagePrompt(3, 2) + "b" + ImagePrompt(5, 5))
	begin, _ := tok.SpecialID(MediaBegin)
	end, _ := tok.SpecialID(MediaEnd)
	out, at, err := ExpandMedia(ids, pad, []int{2, 3})
	require.NoError(t, err)
	require.Len(t, at, 2)
	assert.Equal(t, []int{pad, pad, end}, out[at[0]:at[0]+3])
	assert.Equal(t, []int{pad, pad, pad, end}, out[at[1]:at[1]+4])
	assert.Equal(t, len(ids)+1+2, len(out))
	assert.Contains(t, out, begin)
	// a user's literal pad text is ordinary text: no slot
	assert.NotContains(t, tok.Encode("look: "+MediaPad+" <|kimi_image_placeholder|>"), pad)
	_, _, err = ExpandMedia(ids, pad, []int{2})
	assert.ErrorContains(t, err, "2 image slots for 1 images")
	_, _, err = ExpandMedia(ids, pad, []int{2, 0})
	assert.ErrorContains(t, err, "image 2 has 0 tokens")
}
