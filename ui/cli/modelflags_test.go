package cli

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/expertcache"
)

// TestCachePolicyFlag: --cache-policy offers and accepts exactly the expert
// cache registry's names; anything else is a usage error naming them all.
func TestCachePolicyFlag(t *testing.T) {
	for _, args := range [][]string{
		{"run", tinyRelease, "--ids", "1", "--cache-policy", "bogus"},
		{"chat", tinyRelease, "--cache-policy", "bogus"},
	} {
		code, _, stderr := runK3(args...)
		assert.Equal(t, ExitUsage, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "k3 "+args[0]+`: --cache-policy "bogus" is not layer+r, layer, lru or s3fifo`)
		for _, n := range expertcache.Names() {
			assert.Contains(t, stderr, n)
		}

		code, _, stderr = runK3(args[0], "-h")
		assert.Equal(t, ExitOK, code)
		assert.Contains(t, stderr, `expert cache replacement: layer+r, layer, lru or s3fifo (k3 sim-cache compares them) (default "layer+r")`)
	}

	// Every registry name passes resolve, in any case.
	for _, n := range append(expertcache.Names(), "LRU", "Layer+R") {
		fs := newFlags("run", io.Discard)
		mf := addModelFlags(fs, "run")
		require.NoError(t, fs.Parse([]string{"--cache-policy", n}))
		assert.Equal(t, -1, mf.resolve(fs, io.Discard, io.Discard), n)
	}

	assert.Equal(t, "a", orList([]string{"a"}))
	assert.Equal(t, "a or b", orList([]string{"a", "b"}))
	assert.Equal(t, "a, b or c", orList([]string{"a", "b", "c"}))
}
