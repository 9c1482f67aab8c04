package chat

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"k3/engine"
	"k3/engine/vision"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// Image is one picture of a prompt: decoded and preprocessed as Moonshot's
// processor does, with a key for its content. At is where its pad
// positions start in the prompt's ids (set by ExpandImages).
type Image struct {
	Prep *vision.Prepared
	Key  uint64 // FNV-64a of the file's bytes: the same picture, the same key
	At   int
}

// Size is the image part the renderer writes for the picture.
func (im *Image) Size() *xtml.ImageSize { return &xtml.ImageSize{W: im.Prep.W, H: im.Prep.H} }

// Tokens is the number of prompt positions the picture takes.
func (im *Image) Tokens() int { return im.Prep.Resize.Tokens }

// NewImage decodes and preprocesses a picture for m (PNG, JPEG, GIF or
// WebP). A model
// without a vision tower, and a picture k3 cannot take, are
// refused with one plain error (errors.Is engine.ErrNoVision or
// vision.ErrImage).
func NewImage(m *engine.Model, data []byte) (Image, error) {
	c, err := m.VisionChecked() // a model without a tower is refused here; no weight is read
	if err != nil {
		return Image{}, err
	}
	pic, err := vision.Decode(data)
	if err != nil {
		return Image{}, err
	}
	h := fnv.New64a()
	h.Write(data)
	return Image{Prep: vision.Prepare(pic, c.Patch, c.MergeH), Key: h.Sum64()}, nil
}

// ExpandImages repeats each image's one media pad in ids (as rendered)
// once per image token and sets each image's At. The images are in the
// order of their parts in the transcript.
func ExpandImages(tok *tokenizer.Tokenizer, ids []int, images []Image) ([]int, error) {
	if len(images) == 0 {
		return ids, nil
	}
	pad, err := tok.MediaPadID()
	if err != nil {
		return nil, err
	}
	n := make([]int, len(images))
	for i := range images {
		n[i] = images[i].Tokens()
	}
	out, at, err := tokenizer.ExpandMedia(ids, pad, n)
	if err != nil {
		return nil, err
	}
	for i := range images {
		images[i].At = at[i]
	}
	return out, nil
}

// mediaKeys are the images' keys as the engine records fed pictures.
func mediaKeys(images []Image) []engine.MediaKey {
	k := make([]engine.MediaKey, len(images))
	for i, im := range images {
		k[i] = engine.MediaKey{At: im.At, N: im.Tokens(), Key: im.Key}
	}
	return k
}

// giveImages runs the vision tower on the images st has not fed yet and
// gives their rows to st's pad positions, telling on where it is
// (PictureEvent) after every layer.
func (s *Session) giveImages(ctx context.Context, st *engine.State, images []Image, on func(engine.Event)) error {
	st.DropPendingMedia()
	H := s.Engine.Model().Cfg.Hidden
	n := 0
	for _, im := range images {
		if im.At >= st.Pos {
			n++
		}
	}
	i := 0
	for _, im := range images {
		if im.At < st.Pos {
			continue // fed already (the reused state agrees on it: MediaAgrees)
		}
		i++
		rows, err := s.Engine.EmbedImageProgress(ctx, im.Prep, func(done, layers int) { on(PictureEvent(i, n, done, layers)) })
		if err != nil {
			return err
		}
		if err := st.AddMedia(im.At, rows, H, im.Key); err != nil {
			return fmt.Errorf("image at position %d: %w", im.At, err)
		}
	}
	return nil
}

// PictureEvent is the phase event of the vision tower looking at picture i
// of n: done of layers layers have run (Done, Total), and in Text
// "looking at the picture i/n" with the share done.
func PictureEvent(i, n, done, layers int) engine.Event {
	text := fmt.Sprintf("looking at the picture %d/%d", i, n)
	if done > 0 && layers > 0 {
		text += fmt.Sprintf(" (%d%%)", 100*done/layers)
	}
	return engine.Event{Kind: engine.EventPhase, Text: text, Done: done, Total: layers, At: time.Now()}
}

// Attach reads a picture for Turn's next user message (it goes before the
// message's text). A picture k3 cannot take, or a model without a vision
// tower, is refused at once with the reason.
func (s *Session) Attach(data []byte) error {
	if _, err := s.image(data); err != nil {
		return err
	}
	s.attached = append(s.attached, data)
	return nil
}

// Attached is how many pictures wait for the next user message.
func (s *Session) Attached() int { return len(s.attached) }

// image prepares a picture once per content (the history renders every
// picture at every turn).
func (s *Session) image(data []byte) (Image, error) {
	h := fnv.New64a()
	h.Write(data)
	if im, ok := s.images[h.Sum64()]; ok {
		return im, nil
	}
	im, err := NewImage(s.Engine.Model(), data)
	if err != nil {
		return Image{}, err
	}
	if s.images == nil {
		s.images = map[uint64]Image{}
	}
	s.images[im.Key] = im
	return im, nil
}
