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
