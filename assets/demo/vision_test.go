package demo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/internal/drawings"
)

// TestDemoNamesPictures is issue 40's proof on the engine: held-out
// drawings (internal/drawings: Go's own random numbers, so none was
// trained on), attached as PNG files to "What is in this picture?" in a
// chat session, greedy, half with thinking on and half off. The reply
// names the colour and the shape in at least 90% of them; with thinking
// on the thought says it first.
func TestDemoNamesPictures(t *testing.T) {
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 2)
	pics := drawings.HeldOut(48, 40)
	named := 0
	for i, p := range pics {
		s := chat.NewSession(e, tok)
		require.NoError(t, s.Attach(p.PNG))
		opt := chat.Options{Thinking: i%4 < 2, Sampling: engine.Sampling{Greedy: true}}
		r, err := s.Turn(context.Background(), "What is in this picture?", opt, nil)
		require.NoError(t, err)
		require.Equal(t, engine.StopToken, r.Stop, "picture %d: the reply did not end by itself", i)
		ok := strings.Contains(strings.ToLower(r.Content), p.Label())
		if ok {
			named++
		}
		if opt.Thinking {
			assert.NotEmpty(t, r.Reasoning, "picture %d: no thinking", i)
		} else {
			assert.Empty(t, r.Reasoning, "picture %d", i)
		}
		assert.Empty(t, r.Warnings, "picture %d", i)
		t.Logf("%2d %dx%d %-16s thinking %-5v -> %q / %q", i, p.W, p.H, p.Label(), opt.Thinking, r.Reasoning, r.Content)
	}
	t.Logf("named %d of %d held-out pictures", named, len(pics))
	assert.GreaterOrEqual(t, float64(named)/float64(len(pics)), 0.9)
}

// TestDemoTower: the demo's vision tower is read from its last shard, and
// a picture's cost is what the processor says (56x56: a 4x4 patch grid,
// 2x2 merged: 4 prompt positions).
func TestDemoTower(t *testing.T) {
	dir := write(t)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}})
	require.NoError(t, err)
	defer m.Close()
	tw, err := m.Vision()
	require.NoError(t, err)
	assert.Equal(t, m.Cfg.Hidden, tw.Cfg.TextHidden)
	img, err := chat.NewImage(m, drawings.HeldOut(1, 7)[0].PNG)
	require.NoError(t, err)
	assert.Equal(t, 4, img.Tokens())
}

// TestDemoNamesPicturesOnPlainBackgrounds: a drawing on a white, black or
// other plain background is named as on grey (issue 41: the first demo that
// saw was trained on grey backgrounds only and named a red circle on white
// "yellow" when its size was not a multiple of 28 or larger than the 56-112
// pixels it was trained on: at 64x64 and 200x200 it said "A yellow
// circle."). Every colour and shape on pure white, a red circle on white at
// sizes the processor pads with black, and on black, mid grey, light blue
// and pink; centred, in the base colour.
func TestDemoNamesPicturesOnPlainBackgrounds(t *testing.T) {
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 2)
	white := [3]uint8{255, 255, 255}
	var pics []drawings.Picture
	for _, c := range drawings.ColourNames {
		for _, s := range drawings.Shapes {
			pics = append(pics, drawings.Plain(84, 84, c, s, white))
		}
	}
	for _, side := range []int{64, 100, 128, 160} {
		pics = append(pics, drawings.Plain(side, side, "red", "circle", white))
	}
	for _, bg := range [][3]uint8{{0, 0, 0}, {128, 128, 128}, {173, 216, 230}, {255, 192, 203}} {
		pics = append(pics, drawings.Plain(56, 56, "red", "circle", bg))
	}
	for i, p := range pics {
		s := chat.NewSession(e, tok)
		require.NoError(t, s.Attach(p.PNG))
		opt := chat.Options{Thinking: i%2 == 0, Sampling: engine.Sampling{Greedy: true}}
		r, err := s.Turn(context.Background(), "What is in this picture?", opt, nil)
		require.NoError(t, err)
		t.Logf("%2d %dx%d %-16s thinking %-5v -> %q", i, p.W, p.H, p.Label(), opt.Thinking, r.Content)
		assert.Contains(t, strings.ToLower(r.Content), p.Label(), "picture %d", i)
	}
}
