package bridge

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/engine/vision"
)

func blankPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))))
	return b.Bytes()
}

// TestPicturesCost: the box under the message says what the pictures add
// before sending: a 1024x1024 picture is 1,369 positions at K3's tower, and
// looking at it takes the doctor's cost model's time (its FLOPs at
// doctor.TowerPeakFraction of the FMA peak); its positions count in the
// message's reading and against the context; a model without a tower (or
// an unreadable file) adds nothing.
func TestPicturesCost(t *testing.T) {
	k3 := vision.Released()
	pic := blankPNG(t, 1024, 1024)
	pc := PicturesCost(&k3, [][]byte{pic, []byte("not a picture")}, 41)
	assert.Equal(t, 1, pc.N)
	assert.Equal(t, 1369, pc.Positions)
	g := vision.NavitResize(1024, 1024, 14, 2, vision.InPatchLimit, vision.SideLimit).Grid
	assert.InDelta(t, doctor.PictureSeconds(&k3, g, 41, false, 0), pc.Seconds, 1e-9)
	assert.InDelta(t, 768, pc.Seconds, 1, "9.44 TFLOP at 30% of 41 GFLOP/s")
	assert.Equal(t, Pictures{}, PicturesCost(nil, [][]byte{pic}, 41))

	fast := Cost{SecPerToken: 0.1}
	got := ReplyCost(fast, Prompt{Tokens: 5, Exact: true, Pictures: pc}, 100)
	assert.Equal(t, "Your picture adds 1,369 positions to the message; looking at it takes about 13 min. Your message is 1,374 tokens long.", got)
	two := PicturesCost(&k3, [][]byte{pic, blankPNG(t, 28, 28)}, 0)
	assert.Equal(t, Pictures{N: 2, Positions: 1370}, two, "no FMA peak: the seconds are not known")
	got = ReplyCost(Cost{SecPerToken: 0.1, PassSeconds: 2, Chunk: 512}, Prompt{Tokens: 10, Exact: true, Context: 1000, Pictures: two}, 100)
	assert.Equal(t, "Your 2 pictures add 1,370 positions to the message. Your message is 1,380 tokens long: more than the 1,000 positions a conversation may take, so it will not fit.", got)
	got = ReplyCost(Cost{SecPerToken: 0.1, PassSeconds: 2, Chunk: 512}, Prompt{Tokens: 10, Exact: true, Context: 4096, Pictures: two}, 100)
	assert.Contains(t, got, "reading it takes about 6 s (3 passes)", "the pictures' positions are read like the text's")
}
