package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFMALoop: the roofline loop reports 2 flops per lane per FMA at every
// vector level (12 FMAs an iteration) and nothing on the portable level.
func TestFMALoop(t *testing.T) {
	lanes := map[Level]int64{LevelPortable: 0, LevelAVX2: 4, LevelAVX512: 8, LevelNEON: 2}
	for _, l := range Levels() {
		withLevel(l, func() {
			assert.Equal(t, 1000*12*2*lanes[l], FMALoop(1000), "%v", l)
			assert.Zero(t, FMALoop(0), "%v", l)
			assert.Zero(t, FMALoop(-3), "%v", l)
		})
	}
}
