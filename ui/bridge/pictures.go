package bridge

import (
	"errors"
	"fmt"
	"strings"

	"k3/engine/vision"
)

// AttachPicture reads a picture for the next user message. It says in
// plain words what is wrong with one k3 cannot read, or what the picture
// is ("a 640 x 427 picture").
func (c *Conversation) AttachPicture(data []byte) (string, error) {
	pic, err := vision.Decode(data)
	if err != nil {
		why := strings.TrimPrefix(err.Error(), vision.ErrImage.Error()+": ")
		return "", fmt.Errorf("this picture cannot be used: %s", why)
	}
	c.Pictures = append(c.Pictures, data)
	return fmt.Sprintf("a %d x %d picture", pic.W, pic.H), nil
}

// PictureNote says what waits for the next message ("" for nothing).
func (c *Conversation) PictureNote() string {
	switch n := len(c.Pictures); n {
	case 0:
		return ""
	case 1:
		return "1 picture will go with your next message"
	default:
		return fmt.Sprintf("%d pictures will go with your next message", n)
	}
}

// PicturesRefused says in plain words why the model in modelDir cannot
// take pictures ("" when it can, or when that is not known: a server, a
// folder not there). A model without a vision tower is told at once,
// rather than when the message is sent.
func PicturesRefused(modelDir string) string {
	if modelDir == "" {
		return ""
	}
	if _, err := vision.ReadConfig(modelDir); errors.Is(err, vision.ErrNoVision) {
		return "This model cannot look at pictures: its folder has no vision part. Send text only, or choose a model that can see pictures."
	}
	return ""
}
