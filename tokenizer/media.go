package tokenizer

import (
	"fmt"
	"strconv"
)

// Images in the XTML format (docs/VISION.md §5). An image part renders, as
// one control segment where the part stands, Moonshot's image prompt with
// ONE media pad; ExpandMedia then repeats each image's pad once per image
// token, as the model does when it merges the image's embeddings.

// Media token names.
const (
	MediaBegin   = "<|media_begin|>"
	MediaContent = "<|media_content|>"
	MediaEnd     = "<|media_end|>"
	MediaPad     = "<|media_pad|>"
)

// ImagePrompt is the control segment of one image of w x h pixels (the
// size of the picture as given, before any resize).
func ImagePrompt(w, h int) string {
	return MediaBegin + "image " + strconv.Itoa(w) + "x" + strconv.Itoa(h) + MediaContent + MediaPad + MediaEnd
}

// MediaPadID is the id of <|media_pad|>.
func (t *Tokenizer) MediaPadID() (int, error) {
	id, ok := t.SpecialID(MediaPad)
	if !ok {
		return 0, fmt.Errorf("the tokenizer has no %s token: it cannot take images", MediaPad)
	}
	return id, nil
}

// ExpandMedia repeats the i-th pad id of ids tokens[i] times and returns
// the new ids and where each image's pads start. Every pad must have its
// count and every count its pad (user text never yields the pad id: it is
// encoded with specials disabled).
func ExpandMedia(ids []int, pad int, tokens []int) (out []int, at []int, err error) {
	n := 0
	for _, id := range ids {
		if id == pad {
			n++
		}
	}
	if n != len(tokens) {
		return nil, nil, fmt.Errorf("the prompt has %d image slots for %d images", n, len(tokens))
	}
	total := len(ids) - n
	for _, k := range tokens {
		total += k
	}
	out = make([]int, 0, total)
	for _, id := range ids {
		if id != pad {
			out = append(out, id)
			continue
		}
		k := tokens[len(at)]
		if k <= 0 {
			return nil, nil, fmt.Errorf("image %d has %d tokens", len(at)+1, k)
		}
		at = append(at, len(out))
		for range k {
			out = append(out, pad)
		}
	}
	return out, at, nil
}
