package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/fixture"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// startVision serves tiny-release with tiny-vision's tower (a byte-level
// tokenizer whose specials fit its 512 ids).
func startVision(t *testing.T, mod func(*Options)) (*Server, *engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	dir := fixture.VisionModelDir(t)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	e := m.NewEngine(2)
	o := Options{Engine: e, Tok: tok, ModelID: "k3-demo", DefaultMaxTokens: 8, KeepAlive: time.Hour}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	require.NoError(t, err)
	require.NoError(t, s.Start("127.0.0.1:0"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
		e.Close()
		m.Close()
	})
	return s, e, tok
}

func pngBytes(t *testing.T, w, h int, shade uint8) []byte {
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

// expectedReply is the reply of the engine itself to "Look: IMAGE what?"
// (no thinking), the picture's rows given to its pads.
func expectedReply(t *testing.T, e *engine.Engine, tok *tokenizer.Tokenizer, pic []byte, n int) []int {
	t.Helper()
	im, err := chat.NewImage(e.Model(), pic)
	require.NoError(t, err)
	segs, err := xtml.Render([]xtml.Message{{Role: "user", Parts: []xtml.Part{{Text: "Look: "}, {Image: im.Size()}, {Text: " what?"}}}},
		nil, xtml.RenderOptions{NoThink: true})
	require.NoError(t, err)
	images := []chat.Image{im}
	ids, err := chat.ExpandImages(tok, xtml.Encode(tok, segs), images)
	require.NoError(t, err)
	rows, err := e.EmbedImage(context.Background(), im.Prep)
	require.NoError(t, err)
	st := e.Model().NewState()
	require.NoError(t, st.AddMedia(images[0].At, rows, e.Model().Cfg.Hidden, im.Key))
	res, err := e.Generate(context.Background(), st, ids, engine.GenOptions{MaxTokens: n, StopIDs: tok.StopIDs()})
	require.NoError(t, err)
	return res.Generated
}

// TestServeImages: the same picture through OpenAI image_url (data: URL),
// Anthropic image (base64) and Responses input_image gets the engine's own
// reply to it.
func TestServeImages(t *testing.T) {
	s, e, tok := startVision(t, nil)
	pic := pngBytes(t, 56, 56, 30)
	want := expectedReply(t, e, tok, pic, 6)
	b64 := base64.StdEncoding.EncodeToString(pic)
	text := jsonText(t, tok, want)
	require.NotEmpty(t, text, "the reply has answer text to compare")
	plain := expectedPlain(t, s)
	require.NotContains(t, plain, text, "without the picture the reply differs")
	url := "data:image/png;base64," + b64

	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 6, "return_token_ids": true,
		"chat_template_kwargs": map[string]any{"thinking": false},
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": map[string]string{"url": url}}, {"type": "text", "text": " what?"}}}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	c := decodeChat(t, data)
	assert.Equal(t, want, c.Choices[0].TokenIDs)
	pad, _ := tok.MediaPadID()
	assert.Equal(t, 4, count(c.PromptTokenIDs, pad), "a 56x56 picture takes 4 positions")
	assert.Equal(t, len(c.PromptTokenIDs), c.Usage.PromptTokens)

	resp, data = post(t, s, "/v1/messages", map[string]any{"model": "k3-demo", "max_tokens": 6,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "Look: "},
			{"type": "image", "source": map[string]string{"type": "base64", "media_type": "image/png", "data": b64}},
			{"type": "text", "text": " what?"}}}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.Contains(t, string(data), text)

	resp, data = post(t, s, "/v1/responses", map[string]any{"model": "k3-demo", "max_output_tokens": 6,
		"reasoning": map[string]any{"effort": "none"},
		"input": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "input_text", "text": "Look: "}, {"type": "input_image", "image_url": url}, {"type": "input_text", "text": " what?"}}}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	assert.Contains(t, string(data), text)
}

func count(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// jsonText is the reply's answer text as a JSON string body (no quotes).
func jsonText(t *testing.T, tok *tokenizer.Tokenizer, ids []int) string {
	t.Helper()
	r := xtml.ReadReply(tok, ids, xtml.ReplyOptions{})
	b, err := jsonMarshalString(r.Content)
	require.NoError(t, err)
	return b
}

// TestServeImageErrors: every bad picture is one 400 that says why.
func TestServeImageErrors(t *testing.T) {
	s, _, _ := startVision(t, func(o *Options) { o.MaxContext = 60 })
	pic := pngBytes(t, 56, 56, 0)
	huge := pngBytes(t, 1, 1, 0)
	huge[16], huge[17], huge[18], huge[19] = 0, 0, 0x27, 0x10 // 10000 wide
	huge[20], huge[21], huge[22], huge[23] = 0, 0, 0x27, 0x10 // 10000 high
	fixCRC(huge)
	big := pngBytes(t, 300, 300, 0) // 121 positions: more than the context
	for name, c := range map[string]struct{ url, want string }{
		"web":       {"https://example.com/cat.png", "does not fetch images"},
		"not-data":  {"file:///etc/passwd", "must be a data: URL"},
		"not-b64":   {"data:image/png,rawbytes", "must be base64"},
		"bad-b64":   {"data:image/png;base64,@@@", "base64 data is not valid"},
		"corrupt":   {"data:image/png;base64," + base64.StdEncoding.EncodeToString(pic[:len(pic)/2]), "damaged or cut short"},
		"unknown":   {"data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("GIF? no, plain text")), "unknown image format"},
		"huge":      {"data:image/png;base64," + base64.StdEncoding.EncodeToString(huge), "megapixels"},
		"too-large": {"data:image/png;base64," + base64.StdEncoding.EncodeToString(big), "context"},
	} {
		resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 2,
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{
				{"type": "image_url", "image_url": map[string]string{"url": c.url}}}}}})
		assert.Equal(t, 400, resp.StatusCode, name)
		assert.Contains(t, string(data), c.want, name)
	}
	resp, data := post(t, s, "/v1/messages", map[string]any{"model": "k3-demo", "max_tokens": 2,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image", "source": map[string]string{"type": "url", "url": "https://example.com/x.png"}}}}}})
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(data), "does not fetch images")
}

// TestServeImageWithoutTower: a model folder without a vision tower answers
// an image with a 400 that says so.
func TestServeImageWithoutTower(t *testing.T) {
	s, _, _ := start(t, nil)
	pic := pngBytes(t, 28, 28, 0)
	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 2,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic)}}}}}})
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, string(data), "takes no images")
}

// fixCRC rewrites a PNG's IHDR checksum after its size was edited.
func fixCRC(p []byte) {
	binary.BigEndian.PutUint32(p[29:33], crc32.ChecksumIEEE(p[12:29]))
}

// jsonMarshalString is s as it appears inside a JSON string.
func jsonMarshalString(s string) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return string(b[1 : len(b)-1]), nil
}

// expectedPlain is the server's reply to the same words without the picture.
func expectedPlain(t *testing.T, s *Server) string {
	t.Helper()
	resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 6,
		"chat_template_kwargs": map[string]any{"thinking": false},
		"messages":             []map[string]any{{"role": "user", "content": "Look:  what?"}}})
	require.Equal(t, 200, resp.StatusCode, string(data))
	return string(data)
}

// TestServeTooManyPictures: pictures that fit one by one but not together
// are refused with one 400 (context_length_exceeded) before the tower looks
// at any of them; two of them are answered, the tower looking at each.
func TestServeTooManyPictures(t *testing.T) {
	s, e, _ := startVision(t, func(o *Options) { o.MaxContext = 400 })
	part := map[string]any{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes(t, 56, 56, 0))}}
	ask := func(n int) (int, string) {
		parts := []map[string]any{{"type": "text", "text": "which?"}}
		for range n {
			parts = append(parts, part)
		}
		resp, data := post(t, s, "/v1/chat/completions", map[string]any{"model": "k3-demo", "max_tokens": 2,
			"messages": []map[string]any{{"role": "user", "content": parts}}})
		return resp.StatusCode, string(data)
	}
	// the byte-level tokenizer's prompt: ~350 positions of markup and text,
	// 18 a picture (its 4 positions and its image prompt's bytes)
	code, body := ask(6)
	assert.Equal(t, 400, code)
	assert.Contains(t, body, "context_length_exceeded")
	assert.Contains(t, body, "this server's context is 400")
	assert.Zero(t, e.Model().PicturesSeen(), "refused before the tower ran")
	code, body = ask(2)
	require.Equal(t, 200, code, body)
	assert.Equal(t, int64(2), e.Model().PicturesSeen())
}
