package gui

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"k3/ui/bridge"
)

// The pack step shows the packer's own rate and time left.
func TestPackProgressShowsRateAndETA(t *testing.T) {
	u, _ := newTestUI(t, nil)
	ui(u.Start)
	s := u.wizard.Pack
	ui(func() {
		s.showProgress(bridge.PackProgress{Done: 50e6, Total: 100e6, Rate: 25e6, ETA: 2 * time.Second, Parts: 1, PartsTotal: 2})
		assert.Equal(t, "Packing: 1 of 2 parts done, 50.00 MB of 100.00 MB, 25.00 MB/s, about 2s left", s.Status.Text)
		assert.Equal(t, 0.5, s.Bar.Value)
		s.showProgress(bridge.PackProgress{Done: 0, Total: 100e6, ETA: -1, PartsTotal: 2})
		assert.Equal(t, "Packing: 0 of 2 parts done, 0.00 B of 100.00 MB, 0.00 B/s, estimating time left", s.Status.Text)
	})
}
