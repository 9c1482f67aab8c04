package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k3/internal/fixture"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateRoundTrip: prefill, save, load, continue == one uninterrupted run.
func TestStateRoundTrip(t *testing.T) {
	m := openCase(t, "tiny-release", 16)
	p := fixture.LoadExpect(t, "tiny-release").Prompts[1]
	e := m.NewEngine(2)
	defer e.Close()
	path := filepath.Join(t.TempDir(), "s.k3state")
	st := m.NewState()
	if _, err := e.Generate(context.Background(), st, p.PromptIDs[:30], GenOptions{}); err != nil {
		t.Fatal(err)
	}
	if st.Pos != 30 {
		t.Fatalf("pos %d", st.Pos)
	}
	if err := m.SaveState(path, st); err != nil {
		t.Fatal(err)
	}
	ld, err := m.LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(context.Background(), ld, p.PromptIDs[30:], GenOptions{MaxTokens: len(p.GreedyIDs)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Generated, p.GreedyIDs) {
		t.Fatalf("resumed %v, reference %v", res.Generated, p.GreedyIDs)
	}
	// the resumed state equals the uninterrupted one byte for byte
	full := m.NewState()
	e.Generate(context.Background(), full, p.PromptIDs, GenOptions{MaxTokens: len(p.GreedyIDs)})
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	m.SaveState(a, full)
	m.SaveState(b, res.State)
	ra, _ := os.ReadFile(a)
	rb, _ := os.ReadFile(b)
	if !slices.Equal(ra, rb) {
		t.Fatal("resumed state differs from the uninterrupted one")
	}

	// corrupt, truncated and foreign files are refused
	raw, _ := os.ReadFile(path)
	bad := slices.Clone(raw)
	bad[len(bad)/2] ^= 1
	os.WriteFile(path, bad, 0o644)
	if _, err := m.LoadState(path); err == nil {
		t.Fatal("corrupt state accepted")
	}
	os.WriteFile(path, raw[:len(raw)-9], 0o644)
	if _, err := m.LoadState(path); err == nil {
		t.Fatal("truncated state accepted")
	}
	other, _ := loadCase(t, "tiny-flat-f32")
	os.WriteFile(path, raw, 0o644)
	if _, err := other.LoadState(path); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("foreign state: %v", err)
	}
}

// Audit D6 (rows 3.23-3.26): a state saved from the model at one path loads
// when the same model is reached by an absolute path, through a copy of the
// folder or with an explicit --config, and continues to the same tokens.
func TestStateFollowsTheModelNotItsPath(t *testing.T) {
	src := fixture.ModelDir("tiny-release")
	p := fixture.LoadExpect(t, "tiny-release").Prompts[1]
	rel, err := filepath.Rel(mustGetwd(t), src)
	require.NoError(t, err)
	open := func(dir string, o Options) *Model {
		o.Budget = Budget{CacheBytes: 1 << 62}
		m, err := Open(dir, o)
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	}
	m := open(rel, Options{})
	e := m.NewEngine(2)
	defer e.Close()
	path := filepath.Join(t.TempDir(), "s.k3state")
	st := m.NewState()
	_, err = e.Generate(context.Background(), st, p.PromptIDs[:30], GenOptions{})
	require.NoError(t, err)
	require.NoError(t, m.SaveState(path, st))

	copied := filepath.Join(t.TempDir(), "moved")
	require.NoError(t, os.CopyFS(copied, os.DirFS(src)))
	abs, err := filepath.Abs(src)
	require.NoError(t, err)
	for name, m2 := range map[string]*Model{
		"absolute path":     open(abs, Options{}),
		"copied folder":     open(copied, Options{}),
		"absolute --config": open(rel, Options{Config: filepath.Join(abs, "config.json")}),
	} {
		ld, err := m2.LoadState(path)
		require.NoError(t, err, name)
		e2 := m2.NewEngine(2)
		res, err := e2.Generate(context.Background(), ld, p.PromptIDs[30:], GenOptions{MaxTokens: len(p.GreedyIDs)})
		e2.Close()
		require.NoError(t, err, name)
		assert.Equal(t, p.GreedyIDs, res.Generated, name)
	}
	// still refused for another layer count
	short := open(rel, Options{Layers: 2})
	_, err = short.LoadState(path)
	assert.ErrorIs(t, err, ErrStateMismatch)
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}
