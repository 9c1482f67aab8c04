package kernels

import (
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNEONLevel: ASIMD is part of ARMv8-A, so every arm64 machine (and
// qemu-aarch64) runs the NEON kernels from the start unless K3_PORTABLE
// says otherwise.
func TestNEONLevel(t *testing.T) {
	require.Equal(t, LevelNEON, BestLevel())
	if v := os.Getenv(PortableEnv); v != "" && v != "0" {
		assert.Equal(t, LevelPortable, CurrentLevel(), "%s=%s", PortableEnv, v)
	} else {
		assert.Equal(t, LevelNEON, CurrentLevel())
	}
	assert.Equal(t, []Level{LevelPortable, LevelNEON}, Levels())
	prev := SetLevel(LevelAVX2) // another architecture's level: portable
	defer SetLevel(prev)
	assert.Equal(t, LevelPortable, CurrentLevel())
}

// TestMXNEONTab: every MXFP4 weight is its two table bytes at the top of a
// float64, bit for bit mxTable (the 48 bits below are zero in every entry).
func TestMXNEONTab(t *testing.T) {
	for s := range mxTable {
		for c := range mxTable[s] {
			bits := math.Float64bits(mxTable[s][c])
			require.Zero(t, bits&(1<<48-1), "mxTable[%d][%d] = %v has low bits", s, c, mxTable[s][c])
			got := uint64(mxTopTab[s][c])<<48 | uint64(mxTopTab[s][16+c])<<56
			require.Equal(t, bits, got, "scale %d code %d", s, c)
		}
	}
}
