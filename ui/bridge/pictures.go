package bridge

import (
	"fmt"

	"k3/engine/vision"
)

// AttachPicture reads a picture for the next user message. It says in
// plain words what is wrong with one k3 cannot read, or what the picture
// is ("a 640 x 427 picture").
func (c *Conversation) AttachPicture(data []byte) (string, error) {
	pic, err := vision.Decode(data)
	if err != nil {
		return "", fmt.Errorf("this picture cannot be used: %v", err)
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
