package xtml

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/tokenizer"
)

// TestRenderImageParts: image parts render Moonshot's image prompt as one
// control segment where they stand (cases written from encoding_k3.py,
// testdata/vision/xtml_images.json with their source), and a user's
// literal <|kimi_image_placeholder|> stays text, encoded without specials.
func TestRenderImageParts(t *testing.T) {
	b, err := os.ReadFile(fixture.Path("vision", "xtml_images.json"))
	require.NoError(t, err)
	var f struct {
		Cases []struct {
			Name     string `json:"name"`
			Thinking bool   `json:"thinking"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
					W, H int
				} `json:"content"`
			} `json:"messages"`
			Text    string   `json:"text"`
			Special []string `json:"special_segments"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	require.NotEmpty(t, f.Cases)
	for _, c := range f.Cases {
		var msgs []Message
		for _, m := range c.Messages {
			msg := Message{Role: m.Role, Parts: []Part{}}
			for _, p := range m.Content {
				if p.Type == "image" {
					msg.Parts = append(msg.Parts, Part{Image: &ImageSize{W: p.W, H: p.H}})
				} else {
					msg.Parts = append(msg.Parts, Part{Text: p.Text})
				}
			}
			msgs = append(msgs, msg)
		}
		segs, err := Render(msgs, nil, RenderOptions{NoThink: !c.Thinking})
		require.NoError(t, err, c.Name)
		assert.Equal(t, c.Text, Text(segs), c.Name)
		var special []string
		for _, s := range segs {
			if s.Special {
				special = append(special, s.Text)
			} else {
				assert.NotContains(t, s.Text, tokenizer.MediaPad, "%s: a media pad outside a control segment", c.Name)
			}
		}
		assert.Equal(t, c.Special, special, c.Name)
	}
}
