package serve

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/vision"
	"k3/tokenizer/xtml"
	"k3/ui/openai"
)

// Pictures in requests (docs/VISION.md): OpenAI image_url parts and
// Responses input_image items as data: URLs, Anthropic image blocks as
// base64 sources. k3 fetches nothing: a web address is refused with a 400
// that says so. Every problem with a picture is one 400 with its reason.

// imageFromURL reads a picture given as a data: URL.
func (s *Server) imageFromURL(url, param string) (chat.Image, *openai.Error) {
	low := strings.ToLower(strings.TrimSpace(url))
	if strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://") {
		return chat.Image{}, openai.BadRequest(param, "k3 does not fetch images from the web: send the picture itself as a data: URL (data:image/png;base64,...)")
	}
	if !strings.HasPrefix(low, "data:") {
		return chat.Image{}, openai.BadRequest(param, "an image URL must be a data: URL (data:image/png;base64,...)")
	}
	head, payload, ok := strings.Cut(url[len("data:"):], ",")
	if !ok || !strings.HasSuffix(strings.ToLower(head), ";base64") {
		return chat.Image{}, openai.BadRequest(param, "the image's data: URL must be base64 (data:image/png;base64,...)")
	}
	return s.imageFromBase64(payload, param)
}

func (s *Server) imageFromBase64(payload, param string) (chat.Image, *openai.Error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(payload))
	if err != nil {
		return chat.Image{}, openai.BadRequest(param, "the image's base64 data is not valid: %v", err)
	}
	im, err := chat.NewImage(s.o.Engine.Model(), data)
	switch {
	case err == nil:
		return im, nil
	case errors.Is(err, engine.ErrNoVision), errors.Is(err, vision.ErrImage):
		return chat.Image{}, openai.BadRequest(param, "%v", err)
	}
	return chat.Image{}, &openai.Error{Status: 500, Type: "server_error", Message: fmt.Sprintf("reading the vision tower: %v", err)}
}

// partsOf turns a message's parts into the renderer's, reading each
// picture; images collects them in order.
func (s *Server) partsOf(ps []openai.ContentPart, param string, images *[]chat.Image) ([]xtml.Part, *openai.Error) {
	out := make([]xtml.Part, 0, len(ps))
	for k, p := range ps {
		if !p.Image {
			out = append(out, xtml.Part{Text: p.Text})
			continue
		}
		where := p.Param
		if where == "" {
			where = fmt.Sprintf("%s.content[%d].image_url", param, k)
		}
		im, err := s.imageFromURL(p.ImageURL, where)
		if err != nil {
			return nil, err
		}
		*images = append(*images, im)
		out = append(out, xtml.Part{Image: im.Size()})
	}
	return out, nil
}
