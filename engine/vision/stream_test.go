package vision

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	st "k3/storage/safetensors"
)

func openTinySet(t *testing.T) (*Config, *st.Set) {
	t.Helper()
	dir := fixture.ModelDir("tiny-vision")
	c, err := ReadConfig(dir)
	require.NoError(t, err)
	set, err := st.OpenPartial(dir)
	require.NoError(t, err)
	t.Cleanup(func() { set.Close() })
	return c, set
}

// TestStreamedTowerBitIdentical: a tower whose blocks are read per picture
// gives the resident tower's rows bit for bit, holds what StreamedBytes
// says, and reads every block once per picture.
func TestStreamedTowerBitIdentical(t *testing.T) {
	c, set := openTinySet(t)
	res, err := Bind(c, set)
	require.NoError(t, err)
	str, err := BindStreamed(c, set)
	require.NoError(t, err)
	require.True(t, str.Streamed())
	require.False(t, res.Streamed())
	assert.Equal(t, c.StreamedBytes(), str.Bytes)
	assert.Less(t, str.Bytes, res.Bytes)
	g := Grid{H: 4, W: 6}
	px := testPixels(g, c.Patch, 3)
	want, err := res.Embed(context.Background(), nil, px, g)
	require.NoError(t, err)
	for pic := 1; pic <= 2; pic++ {
		got, err := str.Embed(context.Background(), nil, px, g)
		require.NoError(t, err)
		assert.Equal(t, bitsOf(want), bitsOf(got), "picture %d", pic)
		assert.Equal(t, int64(pic*c.Layers)*c.BlockBytes(), str.BytesRead(), "every block read once per picture")
	}
	assert.Zero(t, res.BytesRead())
}

// TestStreamedTowerRefusesMissingBlock: a streamed tower checks every
// block's tensors when it is bound, not at the picture.
func TestStreamedTowerRefusesMissingBlock(t *testing.T) {
	c, set := openTinySet(t)
	more := *c
	more.Layers++
	_, err := BindStreamed(&more, set)
	assert.ErrorContains(t, err, "missing vision_tower.encoder.blocks.")
}

// TestEmbedCancelsWithinALayer: cancelling while the tower runs stops it
// before the next layer (like the prefill-cancel tests: the progress
// callback cancels after layer 1 of the tiny tower's layers), and a
// streamed tower reads no block after that.
func TestEmbedCancelsWithinALayer(t *testing.T) {
	c, set := openTinySet(t)
	require.GreaterOrEqual(t, c.Layers, 2, "the tiny tower has a layer after the cancel")
	for _, streamed := range []bool{false, true} {
		tw, err := bind(c, set, streamed)
		require.NoError(t, err)
		g := Grid{H: 2, W: 2}
		ctx, cancel := context.WithCancel(context.Background())
		var seen []int
		_, err = tw.EmbedProgress(ctx, nil, testPixels(g, c.Patch, 1), g, func(done, layers int) {
			assert.Equal(t, c.Layers, layers)
			seen = append(seen, done)
			if done == 1 {
				cancel()
			}
		})
		assert.ErrorIs(t, err, context.Canceled, "streamed %v", streamed)
		assert.Equal(t, []int{0, 1}, seen, "streamed %v: no layer ran after the cancel", streamed)
		if streamed {
			assert.Equal(t, c.BlockBytes(), tw.BytesRead())
		}
		cancel()
	}
}

// TestEmbedProgressCountsEveryLayer: an uncancelled picture reports 0..layers.
func TestEmbedProgressCountsEveryLayer(t *testing.T) {
	tw := loadTiny(t)
	g := Grid{H: 2, W: 2}
	var seen []int
	_, err := tw.EmbedProgress(context.Background(), nil, testPixels(g, tw.Cfg.Patch, 1), g, func(done, _ int) { seen = append(seen, done) })
	require.NoError(t, err)
	want := make([]int, tw.Cfg.Layers+1)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, seen)
}
