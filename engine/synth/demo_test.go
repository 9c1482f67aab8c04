package synth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/assets/demo"
	"k3/engine/synth"
	"k3/internal/fixture"
	"k3/storage/safetensors"
	"k3/tokenizer"
)

// TestWriteDemo: the demo folder holds the model, a tokenizer whose ids are
// the model's vocabulary, and the marker; IsDemo tells it from other
// checkpoints; a rewrite gives the same bytes.
func TestWriteDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	assert.False(t, synth.IsDemo(dir))
	assert.False(t, synth.IsDemo(""))
	require.NoError(t, synth.WriteDemo(dir, "small"))
	assert.True(t, synth.IsDemo(dir))

	// the small demo is the trained model (assets/demo), byte for byte
	trained := filepath.Join(t.TempDir(), "trained")
	require.NoError(t, demo.Write(trained))
	assert.Equal(t, fixture.TreeSums(t, trained), fixture.TreeSums(t, dir))
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, 2304, tok.VocabSize())
	set, err := safetensors.Open(dir)
	require.NoError(t, err)
	set.Close()

	// the larger demos: random weights, the K3 tensor graph, labelled
	med := filepath.Join(t.TempDir(), "medium")
	require.NoError(t, synth.WriteDemo(med, "medium"))
	spec, ok := synth.DemoSpec("medium")
	require.True(t, ok)
	tok, err = tokenizer.Load(med)
	require.NoError(t, err)
	assert.Equal(t, spec.Vocab, tok.VocabSize())
	ix, err := safetensors.ReadIndex(med)
	require.NoError(t, err)
	assert.Len(t, ix.Files(), spec.Layers+1)
	notice, err := os.ReadFile(filepath.Join(med, synth.DemoMarker))
	require.NoError(t, err)
	assert.Contains(t, string(notice), "DEMO model (size medium)")
	assert.True(t, synth.IsDemo(med))

	first := fixture.TreeSums(t, dir)
	for name := range first {
		assert.NotEqual(t, '.', filepath.Base(name)[0], "temporary file %s left behind", name)
	}
	require.NoError(t, synth.WriteDemo(dir, "small"))
	assert.Equal(t, first, fixture.TreeSums(t, dir), "a rewrite must give the same bytes")

	// a plain synthetic checkpoint is not a demo
	plain := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, synth.Write(plain, synth.Small()))
	assert.False(t, synth.IsDemo(plain))

	assert.ErrorContains(t, synth.WriteDemo(t.TempDir(), "huge"), `demo size "huge" is not one of [small random medium large]`)
}
