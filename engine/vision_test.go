package engine

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/vision"
	"k3/internal/fixture"
	"k3/kernels"
)

type visionE2E struct {
	PromptIDs   []int     `json:"prompt_ids"`
	MediaAt     int       `json:"media_at"`
	GreedyIDs   []int     `json:"greedy_ids"`
	FirstLogits []float64 `json:"first_logits"`
	Plain       int       `json:"first_id_without_image"`
}

func loadVisionE2E(t *testing.T) visionE2E {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixture.ModelDir("tiny-vision"), "expect.json"))
	require.NoError(t, err)
	var e struct {
		E2E visionE2E `json:"end_to_end"`
	}
	require.NoError(t, json.Unmarshal(b, &e))
	require.NotEmpty(t, e.E2E.GreedyIDs)
	return e.E2E
}

// testImage is the tiny-vision case "same-grid" (a 4x4 patch grid, seed 1)
// as the reference builds it (vision_ref.test_pixels).
func testImage() *vision.Prepared {
	g := vision.Grid{H: 4, W: 4}
	W, H := g.W*14, g.H*14
	px := vision.Raster{W: W, H: H, Chans: 3, Pix: make([]uint8, 3*W*H)}
	for i := 0; i < W*H; i++ {
		for c := range 3 {
			px.Pix[3*i+c] = uint8((131 + 7919*i + 104729*c) % 256)
		}
	}
	return &vision.Prepared{W: 56, H: 56, Resize: vision.Resize{Grid: g, Tokens: 4}, Pixels: px}
}

// TestGenerateReadsImageRows: the language model reads the image's
// projected rows at its pad positions and generates the reference's greedy
// ids (tools/reference/make_vision.py: k3ref with those rows in place of the
// pad embeddings), for a whole prefill, one position per chunk, the
// recomputing path and two thread counts; without the rows the first token
// differs.
func TestGenerateReadsImageRows(t *testing.T) {
	want := loadVisionE2E(t)
	dir := fixture.VisionModelDir(t)
	for _, o := range []struct {
		name      string
		chunk     int
		threads   int
		recompute bool
	}{{"whole", 0, 1, false}, {"chunk1", 1, 2, false}, {"recompute", 3, 2, true}} {
		m, err := Open(dir, Options{Budget: Budget{CacheBytes: 1 << 40}, Chunk: o.chunk})
		require.NoError(t, err, o.name)
		e := m.NewEngine(o.threads)
		rows, err := e.EmbedImage(context.Background(), testImage())
		require.NoError(t, err)
		s := m.NewState()
		require.NoError(t, s.AddMedia(want.MediaAt, rows, m.Cfg.Hidden, 7))
		res, err := e.Generate(context.Background(), s, want.PromptIDs, GenOptions{MaxTokens: len(want.GreedyIDs), Recompute: o.recompute})
		require.NoError(t, err, o.name)
		assert.Equal(t, want.GreedyIDs, res.Generated, o.name)
		if !o.recompute {
			assert.Equal(t, []MediaKey{{At: want.MediaAt, N: 4, Key: 7}}, res.State.FedMedia(), o.name)
			assert.True(t, res.State.MediaAgrees([]MediaKey{{At: want.MediaAt, N: 4, Key: 7}}))
			assert.False(t, res.State.MediaAgrees([]MediaKey{{At: want.MediaAt, N: 4, Key: 8}}), "another picture")
			assert.False(t, res.State.MediaAgrees(nil), "no picture")
		}
		for i, w := range want.FirstLogits {
			require.InDelta(t, w, float64(res.FirstLogits[i]), 1e-3+1e-3*math.Abs(w), "%s logit %d", o.name, i)
		}
		plain, err := e.Generate(context.Background(), nil, want.PromptIDs, GenOptions{MaxTokens: 1})
		require.NoError(t, err)
		assert.Equal(t, want.Plain, plain.Generated[0], "without the image rows")
		assert.NotEqual(t, want.GreedyIDs[0], plain.Generated[0])
		e.Close()
		m.Close()
	}
}

func TestEmbedImageBitIdenticalAcrossThreadsAndLevels(t *testing.T) {
	m, err := Open(fixture.VisionModelDir(t), Options{Budget: Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer m.Close()
	var base []float32
	for _, l := range kernels.Levels() {
		prev := kernels.SetLevel(l)
		for _, n := range []int{1, 2} {
			e := m.NewEngine(n)
			rows, err := e.EmbedImage(context.Background(), testImage())
			e.Close()
			require.NoError(t, err)
			if base == nil {
				base = rows
			}
			require.Equal(t, base, rows, "level %v threads %d", l, n)
		}
		kernels.SetLevel(prev)
	}
}

func TestAddMediaRefusesBadSpans(t *testing.T) {
	m, err := Open(fixture.ModelDir("tiny-release"), Options{Budget: Budget{CacheBytes: 1 << 40}})
	require.NoError(t, err)
	defer m.Close()
	H := m.Cfg.Hidden
	s := m.NewState()
	assert.ErrorContains(t, s.AddMedia(0, make([]float32, H+1), H, 1), "whole rows")
	require.NoError(t, s.AddMedia(2, make([]float32, 3*H), H, 1))
	assert.ErrorContains(t, s.AddMedia(4, make([]float32, H), H, 2), "overlap")
	assert.True(t, s.MediaAgrees([]MediaKey{{At: 2, N: 3, Key: 1}}), "nothing fed yet: nothing before position 0")
	e := m.NewEngine(1)
	defer e.Close()
	_, err = e.EmbedImage(context.Background(), testImage())
	assert.ErrorIs(t, err, ErrNoVision, "tiny-release's vision_config stub has no tensors")
}
