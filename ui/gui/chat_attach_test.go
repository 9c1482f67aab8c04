package gui

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttachPicture: a picture read for the next message is named in plain
// words and goes with it (kept in the conversation's history); one k3
// cannot read is told, and nothing is attached.
func TestAttachPicture(t *testing.T) {
	_, v := chatUI(t, &fakeChat{})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, 30, 20))))
	ui(func() {
		v.attachPicture(strings.NewReader("no picture here"))
		assert.Contains(t, v.Notice.Text, "this picture cannot be used")
		assert.Empty(t, v.Pictures)
		v.attachPicture(bytes.NewReader(b.Bytes()))
		assert.Empty(t, v.Notice.Text)
		assert.Equal(t, "a 30 x 20 picture attached: 1 picture will go with your next message", v.Phase.Text)
		assert.NotNil(t, findButton(v.Root, "Picture…"), "the attach button is on the chat screen")
		v.Send("What is in it?")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.NotEmpty(t, v.History)
		assert.Equal(t, [][]byte{b.Bytes()}, v.History[0].Images)
		assert.Empty(t, v.Pictures)
	})
}
