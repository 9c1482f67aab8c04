package bridge

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAttachPicture(t *testing.T) {
	c := NewConversation(t.TempDir())
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 64, 48))))
	what, err := c.AttachPicture(b.Bytes())
	require.NoError(t, err)
	assert.Equal(t, "a 64 x 48 picture", what)
	_, err = c.AttachPicture([]byte("not a picture"))
	assert.ErrorContains(t, err, "this picture cannot be used")
	assert.Equal(t, "1 picture will go with your next message", c.PictureNote())
	c.AddUser("what is it?")
	assert.Equal(t, [][]byte{b.Bytes()}, c.History[len(c.History)-1].Images)
	assert.Empty(t, c.PictureNote())
}
