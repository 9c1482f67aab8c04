package drawings

import (
	"bytes"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackgrounds: each kind of background keeps its rule (the rules of
// train_vision.py's background()).
func TestBackgrounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		w, b, g := Background(rng, "white"), Background(rng, "black"), Background(rng, "grey")
		for c := range 3 {
			assert.GreaterOrEqual(t, w[c], uint8(239))
			assert.LessOrEqual(t, b[c], uint8(16))
			assert.LessOrEqual(t, absDiff(g[c], g[0]), 24)
		}
		assert.True(t, farFromColours(Background(rng, "colour")))
	}
	assert.False(t, farFromColours([3]uint8{230, 50, 50}), "a red background is too near red")
}

// TestHeldOutBackgrounds: held-out pictures take every kind of background,
// four pictures each in turn, and the corner pixel is the background.
func TestHeldOutBackgrounds(t *testing.T) {
	pics := HeldOut(16, 5)
	for i, p := range pics {
		require.Equal(t, Backgrounds[i/4], p.Background)
		img, err := png.Decode(bytes.NewReader(p.PNG))
		require.NoError(t, err)
		r, _, _, _ := img.At(0, 0).RGBA()
		switch p.Background {
		case "white":
			assert.GreaterOrEqual(t, r>>8, uint32(239), "picture %d", i)
		case "black":
			assert.LessOrEqual(t, r>>8, uint32(16), "picture %d", i)
		}
	}
	p := Plain(56, 56, "red", "circle", [3]uint8{255, 255, 255})
	img, err := png.Decode(bytes.NewReader(p.PNG))
	require.NoError(t, err)
	r, g, b, _ := img.At(28, 28).RGBA()
	assert.Equal(t, []uint32{220, 40, 40}, []uint32{r >> 8, g >> 8, b >> 8}, "the centre is the base red")
	r, _, _, _ = img.At(0, 0).RGBA()
	assert.Equal(t, uint32(255), r>>8)
}

func absDiff(a, b uint8) int { return max(int(a), int(b)) - min(int(a), int(b)) }
