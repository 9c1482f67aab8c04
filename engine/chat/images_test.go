package chat

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/promptcache"
	"k3/internal/fixture"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// visionSession is tiny-release with tiny-vision's tower, and a byte-level
// tokenizer (its specials, <|media_pad|> included, fit tiny-release's
// 512-id vocabulary).
func visionSession(t *testing.T) (*Session, *engine.Model) {
	t.Helper()
	dir := fixture.VisionModelDir(t)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, Chunk: 3})
	require.NoError(t, err)
	e := m.NewEngine(2)
	t.Cleanup(func() { e.Close(); m.Close() })
	return NewSession(e, tok), m
}

func picture(t *testing.T, w, h int, shade uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x*4) + shade, uint8(y * 5), shade, 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// prompt renders a user message "look: IMAGE what is it?" and expands the
// image's pads.
func prompt(t *testing.T, s *Session, im *Image) []int {
	t.Helper()
	segs, err := xtml.Render([]xtml.Message{{Role: "user", Parts: []xtml.Part{{Text: "look: "}, {Image: im.Size()}, {Text: " what is it?"}}}},
		nil, xtml.RenderOptions{NoThink: true})
	require.NoError(t, err)
	images := []Image{*im}
	ids, err := ExpandImages(s.Tok, xtml.Encode(s.Tok, segs), images)
	require.NoError(t, err)
	*im = images[0]
	return ids
}

// direct is the same prompt through the engine alone: a fresh state given
// the image's rows.
func direct(t *testing.T, s *Session, m *engine.Model, ids []int, im Image, n int) []int {
	t.Helper()
	rows, err := s.Engine.EmbedImage(context.Background(), im.Prep)
	require.NoError(t, err)
	st := m.NewState()
	require.NoError(t, st.AddMedia(im.At, rows, m.Cfg.Hidden, im.Key))
	res, err := s.Engine.Generate(context.Background(), st, ids, engine.GenOptions{MaxTokens: n, StopIDs: s.Tok.StopIDs()})
	require.NoError(t, err)
	return res.Generated
}

// TestSessionImages: a session's reply over a prompt with a picture is the
// engine's over the same ids and rows; asked again it reuses the state past
// the picture; another picture at the same positions (the same ids) is not
// mistaken for the first: the state is reused only up to where it starts.
func TestSessionImages(t *testing.T) {
	s, m := visionSession(t)
	a, err := NewImage(m, picture(t, 56, 56, 10))
	require.NoError(t, err)
	b, err := NewImage(m, picture(t, 56, 56, 200))
	require.NoError(t, err)
	require.NotEqual(t, a.Key, b.Key)
	assert.Equal(t, 4, a.Tokens())
	idsA, idsB := prompt(t, s, &a), prompt(t, s, &b)
	require.Equal(t, idsA, idsB, "the same ids: only the rows differ")
	wantA, wantB := direct(t, s, m, idsA, a, 5), direct(t, s, m, idsB, b, 5)
	require.NotEqual(t, wantA, wantB, "the pictures change the reply")

	o := PromptOptions{MaxTokens: 5, Images: []Image{a}}
	rep, err := s.Generate(context.Background(), idsA, o, nil)
	require.NoError(t, err)
	assert.Equal(t, wantA, rep.IDs)
	rep, err = s.Generate(context.Background(), idsA, o, nil)
	require.NoError(t, err)
	assert.Equal(t, wantA, rep.IDs)
	assert.Greater(t, rep.Reused, a.At+a.Tokens(), "the second ask reuses the state past the picture")

	rep, err = s.Generate(context.Background(), idsB, PromptOptions{MaxTokens: 5, Images: []Image{b}}, nil)
	require.NoError(t, err)
	assert.Equal(t, wantB, rep.IDs)
	assert.LessOrEqual(t, rep.Reused, b.At, "a state that read another picture is not reused past it")
}

func TestNewImageRefusals(t *testing.T) {
	s, m := visionSession(t)
	_, err := NewImage(m, []byte("not a picture"))
	assert.ErrorContains(t, err, "unknown image format")
	plain, err := engine.Open(fixture.ModelDir("tiny-release"), engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer plain.Close()
	// tiny-release's config has a vision_config stub but no tensors
	_, err = NewImage(plain, picture(t, 20, 20, 0))
	assert.ErrorIs(t, err, engine.ErrNoVision)
	assert.ErrorContains(t, err, "takes no images")
	_ = s
}

// TestTurnWithAttachedPicture: an attached picture goes with the next user
// message, is kept in the history (and its file), and the next turn reuses
// the state past it; a fresh session over the saved history replies the
// same.
func TestTurnWithAttachedPicture(t *testing.T) {
	s, m := visionSession(t)
	s.HistoryPath = t.TempDir() + "/h.jsonl"
	opt := Options{MaxTokens: 4, Sampling: engine.Sampling{Greedy: true}}
	pic := picture(t, 60, 40, 77)
	require.NoError(t, s.Attach(pic))
	assert.Equal(t, 1, s.Attached())
	assert.ErrorContains(t, s.Attach([]byte("nope")), "unknown image format")
	r1, err := s.Turn(context.Background(), "what is it?", opt, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, s.Attached())
	h := s.History()
	require.Len(t, h, 2)
	assert.Equal(t, [][]byte{pic}, h[0].Images)
	r2, err := s.Turn(context.Background(), "and now?", opt, nil)
	require.NoError(t, err)
	im, err := NewImage(m, pic)
	require.NoError(t, err)
	assert.Greater(t, r2.Reused, im.Tokens(), "the second turn does not read the picture again")

	loaded, err := LoadHistory(s.HistoryPath)
	require.NoError(t, err)
	assert.Equal(t, [][]byte{pic}, loaded[0].Images)
	fresh := NewSession(s.Engine, s.Tok)
	fresh.SetHistory(loaded[:1])
	again, err := fresh.Reply(context.Background(), loaded[:1], opt, nil)
	require.NoError(t, err)
	assert.Equal(t, r1.IDs, again.IDs)
	_, err = ParseHistory([]byte(`{"role":"assistant","content":"x","images":["AAAA"]}` + "\n"))
	assert.ErrorContains(t, err, "images on a assistant message")
}

// TestPromptCacheKeepsPicturesApart: with a prompt cache shared by two
// sessions, the same ids with another picture do not resume from the
// first picture's snapshots (the cache keeps only the text before a
// picture): each reply is the engine's own for its picture.
func TestPromptCacheKeepsPicturesApart(t *testing.T) {
	s, m := visionSession(t)
	c, err := promptcache.Open(m, promptcache.Options{Dir: t.TempDir(), RAMBytes: 1 << 30, DiskBytes: 1 << 30})
	require.NoError(t, err)
	a, err := NewImage(m, picture(t, 56, 56, 10))
	require.NoError(t, err)
	b, err := NewImage(m, picture(t, 56, 56, 200))
	require.NoError(t, err)
	idsA, idsB := prompt(t, s, &a), prompt(t, s, &b)
	wantB := direct(t, s, m, idsB, b, 5)
	s.Cache = c
	_, err = s.Generate(context.Background(), idsA, PromptOptions{MaxTokens: 5, Images: []Image{a}}, nil)
	require.NoError(t, err)
	other := NewSession(s.Engine, s.Tok)
	other.Cache = c
	rep, err := other.Generate(context.Background(), idsB, PromptOptions{MaxTokens: 5, Images: []Image{b}}, nil)
	require.NoError(t, err)
	assert.Equal(t, wantB, rep.IDs)
	assert.LessOrEqual(t, rep.Reused, b.At, "nothing past the picture is resumed from another picture's snapshot")
}

// TestReplyStopsInsideTheTower: while the tower looks at a message's
// pictures the session says so ("looking at the picture i/n", after every
// layer); a stop during the first picture ends the reply there (stopped,
// nothing generated, the second picture never looked at), and the same
// request afterwards gives the reply of a session that was never stopped.
func TestReplyStopsInsideTheTower(t *testing.T) {
	s, m := visionSession(t)
	layers := 0
	if c, err := m.VisionChecked(); assert.NoError(t, err) {
		layers = c.Layers
	}
	h := []Message{{Role: "user", Content: "which is lighter?", Images: [][]byte{picture(t, 56, 56, 10), picture(t, 28, 56, 200)}}}
	opt := Options{MaxTokens: 4, Sampling: engine.Sampling{Greedy: true}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []string
	rep, err := s.Reply(ctx, h, opt, func(ev engine.Event) {
		if ev.Kind == engine.EventPhase {
			seen = append(seen, ev.Text)
			if ev.Done == 1 {
				cancel()
			}
		}
	})
	require.NoError(t, err)
	assert.Equal(t, CutStopped, rep.Cut())
	assert.Empty(t, rep.IDs)
	assert.Equal(t, []string{"looking at the picture 1/2", "looking at the picture 1/2 (50%)"}, seen, "stopped after the first layer")

	seen = nil
	again, err := s.Reply(context.Background(), h, opt, func(ev engine.Event) {
		if ev.Kind == engine.EventPhase {
			seen = append(seen, ev.Text)
		}
	})
	require.NoError(t, err)
	require.Len(t, seen, 2*(layers+1))
	assert.Equal(t, "looking at the picture 1/2", seen[0])
	assert.Equal(t, "looking at the picture 2/2 (100%)", seen[len(seen)-1])
	fresh := NewSession(s.Engine, s.Tok)
	want, err := fresh.Reply(context.Background(), h, opt, nil)
	require.NoError(t, err)
	assert.Equal(t, want.IDs, again.IDs)
	assert.NotEmpty(t, again.IDs)
}
