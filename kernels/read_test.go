package kernels

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReadBlock: every level returns the XOR of the words, at the smallest
// length and at lengths that are not a multiple of the 8 streams' span.
func TestReadBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{512, 1024, 512 * 7, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		var want uint64
		for i := 0; i < n; i += 8 {
			want ^= binary.LittleEndian.Uint64(b[i:])
		}
		for _, l := range append([]Level{LevelPortable}, simdLevels(t)...) {
			withLevel(l, func() { assert.Equal(t, want, ReadBlock(b), "%v, %d bytes", l, n) })
		}
	}
}
