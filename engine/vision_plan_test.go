package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/vision"
	"k3/internal/fixture"
	"k3/machine"
	"k3/storage/trunk"
)

// TestPlanCountsVisionTower: a run that plans a picture counts the vision
// tower: resident above the memory floor (its whole weights, kept), and
// streamed at the floor (the tables, the projector and one layer, for the
// picture only, beside its working memory in the prompt reading's share);
// the streamed tower's rows are the resident one's, bit for bit, and a
// run that plans no picture counts no tower.
func TestPlanCountsVisionTower(t *testing.T) {
	dir := fixture.VisionModelDir(t)
	c, err := vision.ReadConfig(dir)
	require.NoError(t, err)
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err = trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	open := func(trunkBytes int64, picture int) *Model {
		m, err := Open(dir, Options{TrunkDir: tr, Budget: Budget{TrunkBytes: trunkBytes, Ring: 2, CacheBytes: 1}, Picture: picture, Positions: 64})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	floor, above, none := open(1, 16), open(4e9, 16), open(4e9, 0)
	assert.True(t, floor.Plan.TowerStreamed)
	assert.Equal(t, c.StreamedBytes(), floor.Plan.Tower)
	assert.False(t, above.Plan.TowerStreamed)
	assert.Equal(t, c.WeightBytes(), above.Plan.Tower)
	for _, m := range []*Model{floor, above} {
		assert.Equal(t, 16, m.Plan.PicturePos)
		assert.Equal(t, 16*c.WorkPerPos(), m.Plan.Picture)
		assert.Contains(t, m.Plan.String(), "vision tower")
	}
	assert.Zero(t, none.Plan.Tower)
	assert.Zero(t, none.Plan.Picture)
	assert.NotContains(t, none.Plan.String(), "vision tower")
	assert.Equal(t, none.Plan.Total+c.WeightBytes()+max(0, 16*c.WorkPerPos()-none.Plan.Prefill), above.Plan.Total-(above.Plan.Baseline-none.Plan.Baseline),
		"resident: the weights and the larger of the picture and the prompt reading")
	var rows [2][]float32
	for i, m := range []*Model{floor, above} {
		e := m.NewEngine(1)
		var seen []int
		rows[i], err = e.EmbedImageProgress(context.Background(), testImage(), func(done, _ int) { seen = append(seen, done) })
		require.NoError(t, err)
		assert.Len(t, seen, c.Layers+1)
		e.Close()
	}
	assert.Equal(t, rows[1], rows[0], "the streamed tower gives the resident one's rows")
	tw, err := floor.Vision()
	require.NoError(t, err)
	assert.True(t, tw.Streamed(), "at the floor each picture gets a streamed tower")
}

// TestPictureLargerThanPlannedChecksMemory: a picture larger than the plan
// reserved is checked against the memory available then and refused,
// before the tower runs, when it does not fit.
func TestPictureLargerThanPlannedChecksMemory(t *testing.T) {
	dir := fixture.VisionModelDir(t)
	m, err := Open(dir, Options{Budget: Budget{CacheBytes: 1 << 40}, Picture: 1})
	require.NoError(t, err)
	defer m.Close()
	c, err := m.VisionChecked()
	require.NoError(t, err)
	prev := readMemory
	defer func() { readMemory = prev }()
	more := c.WorkPerPos() * 3 // testImage is 4 positions, 1 planned
	readMemory = func() (machine.Memory, error) { return machine.Memory{AvailableBytes: more}, nil }
	e := m.NewEngine(1)
	defer e.Close()
	_, err = e.EmbedImage(context.Background(), testImage())
	assert.ErrorIs(t, err, ErrPictureMemory)
	assert.ErrorContains(t, err, "4 prompt positions")
	assert.False(t, m.vision.held.Load(), "refused before the tower was read")
	readMemory = func() (machine.Memory, error) { return machine.Memory{AvailableBytes: 2 * more}, nil }
	_, err = e.EmbedImage(context.Background(), testImage())
	require.NoError(t, err)
}
