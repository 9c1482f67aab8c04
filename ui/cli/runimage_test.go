package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/fixture"
	"k3/tokenizer"
)

func writePNG(t *testing.T, path string, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 9), uint8(y * 3), 90, 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	return b.Bytes()
}

// TestRunImage: k3 run --image feeds the picture's image prompt before the
// text, its pads read the tower's rows, and the generated ids are the
// engine's own for that prompt and picture.
func TestRunImage(t *testing.T) {
	dir := fixture.VisionModelDir(t)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	pic := filepath.Join(t.TempDir(), "p.png")
	data := writePNG(t, pic, 40, 30)
	out := filepath.Join(t.TempDir(), "r.json")
	var so, se bytes.Buffer
	code := run([]string{"run", dir, "--prompt", "what is this?", "--image", pic, "--gen", "5", "--out", out}, &so, &se)
	require.Equal(t, ExitOK, code, se.String())
	assert.Contains(t, so.String(), "image    : "+pic+" 40x30 -> 4 positions (grid 4x4)")
	var rep runReport
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rep))

	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer m.Close()
	e := m.NewEngine(1)
	defer e.Close()
	im, err := chat.NewImage(m, data)
	require.NoError(t, err)
	images := []chat.Image{im}
	ids, err := chat.ExpandImages(tok, append(tok.EncodeSpecial(tokenizer.ImagePrompt(40, 30)), tok.Encode("what is this?")...), images)
	require.NoError(t, err)
	assert.Equal(t, ids, rep.PromptIDs)
	rows, err := e.EmbedImage(context.Background(), im.Prep)
	require.NoError(t, err)
	st := m.NewState()
	require.NoError(t, st.AddMedia(images[0].At, rows, m.Cfg.Hidden, im.Key))
	res, err := e.Generate(context.Background(), st, ids, engine.GenOptions{MaxTokens: 5})
	require.NoError(t, err)
	assert.Equal(t, res.Generated, rep.GeneratedIDs)
}

func TestRunImageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.png")
	require.NoError(t, os.WriteFile(bad, []byte("not a picture"), 0o644))
	var so, se bytes.Buffer
	assert.Equal(t, ExitUsage, run([]string{"run", fixture.ModelDir("tiny-release"), "--prompt", "x", "--image", bad}, &so, &se))
	assert.Contains(t, se.String(), "unknown image format")
	se.Reset()
	assert.Equal(t, ExitUsage, run([]string{"run", fixture.ModelDir("tiny-release"), "--ids", "1,2", "--image", bad}, &so, &se))
	assert.Contains(t, se.String(), "--image goes with --prompt")
}

// TestChatImage: k3 chat --image attaches a picture to the first message
// and /image to a later one; both are kept in the history file; a bad
// picture at /image is told and the chat goes on; a model without a tower
// refuses --image with exit 2.
func TestChatImage(t *testing.T) {
	dir := fixture.VisionModelDir(t)
	require.NoError(t, tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{}))
	a, b := filepath.Join(t.TempDir(), "a.png"), filepath.Join(t.TempDir(), "b.png")
	da, db := writePNG(t, a, 56, 28), writePNG(t, b, 30, 30)
	bad := filepath.Join(t.TempDir(), "bad.gif")
	require.NoError(t, os.WriteFile(bad, []byte("GIF89a-cut"), 0o644))
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	stdin = strings.NewReader("what is it?\n/image " + bad + "\n/image " + b + "\nand this?\n/exit\n")
	defer func() { stdin = nil }()
	code, out, errs := runK3("chat", dir, "--gen", "3", "--no-think", "--history", hist, "--image", a)
	require.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "picture "+a+": 56x28, 2 prompt positions")
	assert.Contains(t, out, "/image: ")
	assert.Contains(t, out, "picture "+b+": 30x30, 4 prompt positions")
	h, err := chat.LoadHistory(hist)
	require.NoError(t, err)
	require.Len(t, h, 4)
	assert.Equal(t, [][]byte{da}, h[0].Images)
	assert.Equal(t, [][]byte{db}, h[2].Images)

	stdin = strings.NewReader("/exit\n")
	code, _, errs = runK3("chat", demoModel(t), "--image", a)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "takes no images")
}

// TestTemplateImage: k3 template renders an image_url part (a data: URL)
// as Moonshot's encoder does: the image prompt with the picture's size and
// one media pad, where the part stands; its ids hold the media tokens.
func TestTemplateImage(t *testing.T) {
	pic := writePNG(t, filepath.Join(t.TempDir(), "p.png"), 33, 21)
	msgs := filepath.Join(t.TempDir(), "m.json")
	require.NoError(t, os.WriteFile(msgs, []byte(`[{"role":"user","content":[{"type":"text","text":"Look "},`+
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,`+base64.StdEncoding.EncodeToString(pic)+`"}},`+
		`{"type":"text","text":" <|kimi_image_placeholder|>"}]}]`), 0o644))
	code, out, errs := tokRunCmd("template", "--tok", tokParityDir, "--messages", msgs, "--no-think")
	require.Equal(t, ExitOK, code, errs)
	var r struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	assert.Contains(t, r.Text, "Look <|media_begin|>image 33x21<|media_content|><|media_pad|><|media_end|> <|kimi_image_placeholder|><|close|>")
	tok, err := tokenizer.Load(tokParityDir)
	require.NoError(t, err)
	for _, name := range []string{"<|media_begin|>", "<|media_content|>", "<|media_pad|>", "<|media_end|>"} {
		id, ok := tok.SpecialID(name)
		require.True(t, ok, name)
		assert.Equal(t, 1, count(r.IDs, id), name)
	}
	if id, ok := tok.SpecialID("<|kimi_image_placeholder|>"); ok {
		assert.Equal(t, 0, count(r.IDs, id), "the typed placeholder stays text")
	}
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
