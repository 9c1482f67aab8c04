package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
	"k3/internal/fixture"
	"k3/tokenizer"
)

// TestDemoCommand: `k3 demo` writes the demo the app writes (synth.WriteDemo,
// byte for byte) and the app's check (synth.IsDemo) recognises it, at every
// size it was tried with.
func TestDemoCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errs := runK3("demo", dir)
	require.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "wrote a small demo checkpoint to "+dir)
	assert.Contains(t, out, "DEMO: a tiny Kimi K3 (2.1 million parameters) trained on fortune-cookie sayings and drawings")
	assert.NotContains(t, out, "random weights", "the default demo is the trained one")
	assert.True(t, synth.IsDemo(dir), "k3 demo's folder is not recognised as the demo")

	app := filepath.Join(t.TempDir(), "app-demo")
	require.NoError(t, synth.WriteDemo(app, "small"))
	assert.Equal(t, fixture.TreeSums(t, app), fixture.TreeSums(t, dir), "k3 demo and the app wrote different folders")

	// a non-default size is labelled too, with a tokenizer of its vocabulary
	med := filepath.Join(t.TempDir(), "medium")
	code, out, errs = runK3("demo", med, "--size", "medium")
	require.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "DEMO: random weights")
	assert.True(t, synth.IsDemo(med), "k3 demo --size medium is not recognised as a demo")
	tok, err := tokenizer.Load(med)
	require.NoError(t, err)
	assert.Equal(t, synth.Medium().Vocab, tok.VocabSize())
}

func TestDemoCommandErrors(t *testing.T) {
	code, _, errs := runK3("demo", t.TempDir(), "--size", "huge")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `--size "huge" is not small, random, medium or large`)

	busy := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(busy, "notes.txt"), []byte("x"), 0o644))
	code, _, errs = runK3("demo", busy)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "exists and is not empty")
	assert.False(t, synth.IsDemo(busy))
}
