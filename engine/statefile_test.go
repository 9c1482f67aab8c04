package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k3/internal/fixture"
	st2 "k3/storage/safetensors"

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

// Audit N9 (ST1): a state saved from one checkpoint is refused by a
// fine-tune of the same layout (one tensor's weights changed, names, sizes,
// headers and file times kept); a version 1 state file is refused with
// what to do. A saved state is private (0600 less the umask).
func TestStateRefusedByAFineTuneOfTheSameLayout(t *testing.T) {
	src := fixture.ModelDir("tiny-release")
	p := fixture.LoadExpect(t, "tiny-release").Prompts[1]
	open := func(dir string) *Model {
		m, err := Open(dir, Options{Budget: Budget{CacheBytes: 1 << 62}})
		require.NoError(t, err)
		t.Cleanup(m.Close)
		return m
	}
	m := open(src)
	e := m.NewEngine(2)
	defer e.Close()
	path := filepath.Join(t.TempDir(), "s.k3state")
	st := m.NewState()
	_, err := e.Generate(context.Background(), st, p.PromptIDs[:30], GenOptions{})
	require.NoError(t, err)
	require.NoError(t, m.SaveState(path, st))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, fi.Mode().Perm()&0o077, "a state file is private: %v", fi.Mode())

	ft := filepath.Join(t.TempDir(), "ft")
	require.NoError(t, os.CopyFS(ft, os.DirFS(src)))
	set, err := st2.Open(ft)
	require.NoError(t, err)
	tn, ok := set.Get("language_model.model.layers.1.self_attn.o_proj.weight")
	require.True(t, ok)
	shard, off := tn.Path, tn.Offset
	set.Close()
	orig, err := os.Stat(shard)
	require.NoError(t, err)
	f, err := os.OpenFile(shard, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 2)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Chtimes(shard, orig.ModTime(), orig.ModTime()))

	_, err = open(ft).LoadState(path)
	require.ErrorIs(t, err, ErrStateMismatch)
	assert.Contains(t, err.Error(), "was saved from another model (other weights or config)")
	_, err = open(filepath.Join(ft, "..", "ft")).LoadState(path)
	require.ErrorIs(t, err, ErrStateMismatch, "by any path")

	// an unchanged copy still loads it
	same := filepath.Join(t.TempDir(), "same")
	require.NoError(t, os.CopyFS(same, os.DirFS(src)))
	_, err = open(same).LoadState(path)
	require.NoError(t, err)

	// a version 1 file (no weights in its fingerprint) is refused clearly
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	v1 := slices.Clone(raw)
	binary.LittleEndian.PutUint32(v1[8:], 1)
	binary.LittleEndian.PutUint32(v1[len(v1)-4:], crc32.Checksum(v1[:len(v1)-4], castagnoli))
	require.NoError(t, os.WriteFile(path, v1, 0o600))
	_, err = m.LoadState(path)
	require.ErrorIs(t, err, ErrStateMismatch)
	assert.Contains(t, err.Error(), "saved by an older k3, whose state files do not identify the model's weights")
}
