package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k3/internal/fixture"
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
