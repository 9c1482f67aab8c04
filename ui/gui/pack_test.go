package gui

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
)

// The pack step shows the packer's own rate and time left.
func TestPackProgressShowsRateAndETA(t *testing.T) {
	u, _ := newTestUI(t, nil)
	ui(u.Start)
	s := u.Wizard.Pack
	ui(func() {
		s.showProgress(PackProgress{Done: 50e6, Total: 100e6, BytesPerSec: 25e6, ETA: 2 * time.Second, Layer: 1, Layers: 2})
		assert.Equal(t, "Layer 1 of 2, 50.00 MB of 100.00 MB, 25.00 MB/s, about 2s left", s.Status.Text)
		assert.Equal(t, 0.5, s.Bar.Value)
		s.showProgress(PackProgress{Done: 0, Total: 100e6, ETA: -1, Layers: 2})
		assert.Equal(t, "Layer 0 of 2, 0.00 B of 100.00 MB, 0.00 B/s, estimating time left", s.Status.Text)
	})
}

// The trunk adapter passes storage/trunk's rate and ETA through.
func TestTrunkPackerPassesRateAndETA(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m")
	require.NoError(t, synth.Write(model, synth.Small()))
	var got []PackProgress
	require.NoError(t, trunkPacker{}.Pack(context.Background(), model, filepath.Join(t.TempDir(), "trunk"), 0, func(p PackProgress) {
		got = append(got, p)
	}))
	require.NotEmpty(t, got)
	rated := false
	for _, p := range got {
		rated = rated || p.BytesPerSec > 0
	}
	assert.True(t, rated, "no progress report carried a rate: %+v", got)
	last := got[len(got)-1]
	assert.Equal(t, last.Total, last.Done)
	assert.Equal(t, time.Duration(0), last.ETA)
}
