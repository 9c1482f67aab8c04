package cli

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/engine"
	"k3/engine/chat"
)

// TestChatPrinterShowsPictures: k3 chat shows the tower looking at a
// picture on one line it rewrites after every layer, ended when the last
// layer ran; other phase text (no layers) is not printed.
func TestChatPrinterShowsPictures(t *testing.T) {
	var b bytes.Buffer
	p := chatPrinter(&b)
	p(engine.Event{Kind: engine.EventPhase, Text: "waiting"})
	for done := 0; done <= 2; done++ {
		p(chat.PictureEvent(2, 3, done, 2))
	}
	assert.Equal(t, "\r[looking at the picture 2/3]\r[looking at the picture 2/3 (50%)]\r[looking at the picture 2/3 (100%)]\n", b.String())
}
