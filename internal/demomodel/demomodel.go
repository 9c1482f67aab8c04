// Package demomodel gives tests across packages the small synthetic K3
// model (engine/synth's Small, random weights) with a byte-level
// tokenizer, written to a folder and opened whole in memory. Only tests
// import it.
package demomodel

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/synth"
	"k3/tokenizer"
)

// Write writes the small synthetic model and a byte-level tokenizer into
// dir.
func Write(dir string) error {
	if err := synth.Write(dir, synth.Small()); err != nil {
		return err
	}
	return tokenizer.WriteByteLevel(dir, tokenizer.ByteLevelOptions{})
}

// Dir writes the model into a new temporary folder of t and returns it.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, Write(dir))
	return dir
}

// Open opens the model and tokenizer in dir: the whole model cached, a
// prompt read 16 positions at a time, threads threads (0: the physical
// cores). Both are closed when t ends.
func Open(t testing.TB, dir string, threads int) (*engine.Engine, *tokenizer.Tokenizer) {
	t.Helper()
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}, Chunk: 16})
	require.NoError(t, err)
	e := m.NewEngine(threads)
	t.Cleanup(func() { e.Close(); m.Close() })
	return e, tok
}
