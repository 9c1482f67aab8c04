package safetensors

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSampleDigestTellsChangedWeights(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	big := make([]byte, 64<<10) // 16 blocks: sampled at 0, 28672 and 61440
	for i := range big {
		big[i] = byte(i * 7)
	}
	small := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	write := func(b, s []byte) {
		require.NoError(t, WriteFile(path, []WriteTensor{
			{Name: "big", DType: U8, Shape: []int64{int64(len(b))}, Data: b},
			{Name: "small", DType: U8, Shape: []int64{int64(len(s))}, Data: s},
		}, nil))
	}
	digest := func() [32]byte {
		set, err := OpenFile(path)
		require.NoError(t, err)
		defer set.Close()
		d, err := set.SampleDigest([]string{"big", "small"})
		require.NoError(t, err)
		n, reads := set.SampleReads([]string{"big", "small"})
		assert.Equal(t, int64(3*SampleBlock+len(small)), n)
		assert.Equal(t, int64(4), reads)
		return d
	}
	write(big, small)
	base := digest()
	assert.Equal(t, base, digest(), "deterministic")

	for _, off := range []int{0, 28672 + 100, len(big) - 1} {
		b := append([]byte(nil), big...)
		b[off]++
		write(b, small)
		assert.NotEqual(t, base, digest(), "a change at %d (sampled) is seen", off)
	}
	s := append([]byte(nil), small...)
	s[3]++
	write(big, s)
	assert.NotEqual(t, base, digest(), "a small tensor is read whole")

	// outside the sampled blocks a change is not seen: the digest samples
	b := append([]byte(nil), big...)
	b[8192]++
	write(b, small)
	assert.Equal(t, base, digest())

	set, err := OpenFile(path)
	require.NoError(t, err)
	defer set.Close()
	_, err = set.SampleDigest([]string{"big", "nope"})
	require.ErrorContains(t, err, `no tensor "nope"`)
	require.NoError(t, os.Truncate(path, 100))
	_, err = set.SampleDigest([]string{"big"})
	require.Error(t, err)
}
