package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/vision"
	"k3/tokenizer"
)

// runImage is one --image of k3 run: the file, read and checked when the
// flags are parsed (so a bad picture is a usage error before the model
// opens), and its size for the prompt.
type runImage struct {
	path string
	data []byte
	w, h int
}

// readRunImages reads and decodes every --image file.
func readRunImages(paths []string) ([]runImage, error) {
	var out []runImage
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		pic, err := vision.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("--image %s: %v", p, err)
		}
		out = append(out, runImage{path: p, data: data, w: pic.W, h: pic.H})
	}
	return out, nil
}

// imagePromptIDs are the pictures' image prompts (one pad each), to go
// before the prompt text: k3 run feeds raw text, so the pictures lead it.
func imagePromptIDs(tok *tokenizer.Tokenizer, imgs []runImage) []int {
	var ids []int
	for _, im := range imgs {
		ids = append(ids, tok.EncodeSpecial(tokenizer.ImagePrompt(im.w, im.h))...)
	}
	return ids
}

// imagePositions estimates the positions the pictures add to the prompt
// (one pad becomes the image's tokens) for the memory plan, at K3's patch
// and merge sizes.
func imagePositions(imgs []runImage) int {
	n := 0
	for _, im := range imgs {
		n += vision.NavitResize(im.w, im.h, 14, 2, vision.InPatchLimit, vision.SideLimit).Tokens - 1
	}
	return n
}

// largestPicture is the prompt positions of the largest picture (the
// memory plan reserves room for one at a time: the tower looks at them in
// turn), at K3's patch and merge sizes; 0 without pictures.
func largestPicture(imgs []runImage) int {
	n := 0
	for _, im := range imgs {
		n = max(n, vision.NavitResize(im.w, im.h, 14, 2, vision.InPatchLimit, vision.SideLimit).Tokens)
	}
	return n
}

// giveRunImages prepares the pictures for m, expands their pads in c.ids
// and gives st (created when nil) the tower's rows at their positions.
func (c *runConfig) giveRunImages(ctx context.Context, e *engine.Engine, st *engine.State, stdout, stderr io.Writer) (*engine.State, error) {
	if len(c.images) == 0 {
		return st, nil
	}
	m := e.Model()
	images := make([]chat.Image, len(c.images))
	for i, ri := range c.images {
		im, err := chat.NewImage(m, ri.data)
		if err != nil {
			return st, fmt.Errorf("--image %s: %w", ri.path, err)
		}
		images[i] = im
	}
	ids, err := chat.ExpandImages(c.tok, c.ids, images)
	if err != nil {
		return st, err
	}
	c.ids = ids
	if st == nil {
		st = m.NewState()
	}
	for i, im := range images {
		t0 := time.Now()
		rows, err := e.EmbedImageProgress(ctx, im.Prep, func(done, layers int) {
			if ev := chat.PictureEvent(i+1, len(images), done, layers); done >= layers {
				fmt.Fprintf(stderr, "\r[%s]\n", ev.Text)
			} else {
				fmt.Fprintf(stderr, "\r[%s]", ev.Text)
			}
		})
		if err != nil {
			return st, fmt.Errorf("--image %s: %w", c.images[i].path, err)
		}
		if err := st.AddMedia(st.Pos+im.At, rows, m.Cfg.Hidden, im.Key); err != nil {
			return st, err
		}
		fmt.Fprintf(stdout, "  image    : %s %dx%d -> %d positions (grid %dx%d), vision tower %.2f s\n", c.images[i].path,
			im.Prep.W, im.Prep.H, im.Tokens(), im.Prep.Resize.Grid.W, im.Prep.Resize.Grid.H, time.Since(t0).Seconds())
	}
	return st, nil
}
