package promptcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/internal/fixture"
)

func openModel(t *testing.T, name string) *engine.Model {
	t.Helper()
	m, err := engine.Open(fixture.ModelDir(name), engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}, Chunk: 16})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m
}

// fed is the state of feeding ids from the start.
func fed(t *testing.T, m *engine.Model, ids []int) *engine.State {
	t.Helper()
	e := m.NewEngine(2)
	defer e.Close()
	s := m.NewState()
	_, err := e.Feed(context.Background(), s, ids, false)
	require.NoError(t, err)
	return s
}

func encoded(t *testing.T, m *engine.Model, s *engine.State) []byte {
	t.Helper()
	b, err := m.EncodeState(s)
	require.NoError(t, err)
	return b
}

type warnings []string

func (w *warnings) add(s string) { *w = append(*w, s) }

func prompt(t *testing.T) []int { return fixture.LoadExpect(t, "tiny-release").Prompts[1].FullIDs }

// TestAcrossRestart: snapshots kept by one cache are found by another
// opened on the same folder (a restart), equal byte for byte to the state
// of reading their ids, and a generation resumed from them gives the
// tokens of one without the cache. Files are private.
func TestAcrossRestart(t *testing.T) {
	m := openModel(t, "tiny-release")
	ids := prompt(t)
	dir := filepath.Join(t.TempDir(), "prompts")
	c, err := Open(m, Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30})
	require.NoError(t, err)
	e := m.NewEngine(2)
	defer e.Close()
	_, err = e.Generate(context.Background(), nil, ids[:30], engine.GenOptions{MaxTokens: 1, Cache: &engine.CacheUse{Cache: c, Every: -1}})
	require.NoError(t, err)
	assert.Equal(t, 2, c.Stats().Entries, "the prompt's end and the position before it")

	var w warnings
	again, err := Open(m, Options{Dir: dir, RAMBytes: 0, DiskBytes: 1 << 30, Warn: w.add})
	require.NoError(t, err)
	assert.Empty(t, w)
	got := again.Longest("", ids, len(ids))
	require.NotNil(t, got)
	require.Equal(t, 30, got.Pos)
	assert.Equal(t, encoded(t, m, fed(t, m, ids[:30])), encoded(t, m, got))

	want, err := e.Generate(context.Background(), nil, ids, engine.GenOptions{MaxTokens: 4})
	require.NoError(t, err)
	res, err := e.Generate(context.Background(), nil, ids, engine.GenOptions{MaxTokens: 4, Cache: &engine.CacheUse{Cache: again}})
	require.NoError(t, err)
	assert.Equal(t, 30, res.Reused)
	assert.Equal(t, want.Generated, res.Generated)

	fi, err := os.Stat(ModelDir(dir, m))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	for _, f := range Files(dir) {
		fi, err := os.Stat(f.Path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f.Path)
		assert.True(t, f.OK)
	}
}

// keepN keeps the snapshots of ids[:n] for every n in ns, in order.
func keepN(t *testing.T, m *engine.Model, c *Cache, part string, ids []int, ns ...int) {
	for _, n := range ns {
		c.Keep(part, fed(t, m, ids[:n]))
	}
}

// TestEvictionOrder: past the disk budget the least recently used file
// goes first (a snapshot used since stays), and the memory tier holds its
// budget, what leaves it staying on disk.
func TestEvictionOrder(t *testing.T) {
	m := openModel(t, "tiny-release")
	ids := prompt(t)
	dir := t.TempDir()
	one, err := encode(m, "", fed(t, m, ids[:10]))
	require.NoError(t, err)
	// entries differ in size by their ids and MLA rows: the budget holds
	// three of the four
	perPos := int64(len(encoded(t, m, fed(t, m, ids[:11])))) - int64(len(encoded(t, m, fed(t, m, ids[:10]))))
	budget := 3*int64(len(one)) + perPos*5 + 100
	state := fed(t, m, ids[:10]).Bytes()
	c, err := Open(m, Options{Dir: dir, RAMBytes: 2*state + 5*perPos, DiskBytes: budget})
	require.NoError(t, err)
	keepN(t, m, c, "", ids, 10, 11, 12)
	require.Equal(t, 3, c.Stats().Entries)
	assert.LessOrEqual(t, c.Stats().RAMBytes, 2*state+5*perPos, "memory budget held")
	require.NotNil(t, c.Longest("", ids[:10], 10), "10 used: 11 is now the least recently used")
	keepN(t, m, c, "", ids, 13)
	st := c.Stats()
	assert.LessOrEqual(t, st.DiskBytes, budget)
	assert.LessOrEqual(t, st.RAMBytes, 2*state+5*perPos)
	var held []int
	for _, f := range Files(dir) {
		held = append(held, f.Positions)
	}
	assert.ElementsMatch(t, []int{10, 12, 13}, held, "11 went first")
	got := c.Longest("", ids[:12], 11)
	require.NotNil(t, got)
	assert.Equal(t, 10, got.Pos, "11 is gone from memory and disk")
}

// TestRefusesDamagedFiles: a truncated file, a file with a flipped byte, a
// file of another model and a file that is not an entry are each skipped
// with a warning and never used.
func TestRefusesDamagedFiles(t *testing.T) {
	m := openModel(t, "tiny-release")
	other := openModel(t, "tiny-flat-f32")
	ids := prompt(t)
	dir := t.TempDir()
	c, err := Open(m, Options{Dir: dir, RAMBytes: 0, DiskBytes: 1 << 30})
	require.NoError(t, err)
	keepN(t, m, c, "", ids, 8, 16, 24)
	path := func(n int) string { return filepath.Join(ModelDir(dir, m), fileName("", ids[:n])) }
	raw, err := os.ReadFile(path(24))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path(24), raw[:len(raw)-100], 0o600)) // truncated
	raw, err = os.ReadFile(path(16))
	require.NoError(t, err)
	raw[len(raw)/2] ^= 0x40
	require.NoError(t, os.WriteFile(path(16), raw, 0o600)) // one bit flipped
	// another model's snapshot of the same ids, put in this model's folder
	foreign, err := encode(other, "", fed(t, other, fixture.LoadExpect(t, "tiny-flat-f32").Prompts[1].FullIDs[:20]))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ModelDir(dir, m), fileName("", ids[:20])), foreign, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ModelDir(dir, m), "junk"+fileExt), []byte("not a snapshot at all"), 0o600))

	var w warnings
	again, err := Open(m, Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30, Warn: w.add})
	require.NoError(t, err)
	got := again.Longest("", ids, len(ids))
	require.NotNil(t, got)
	assert.Equal(t, 8, got.Pos, "only the intact snapshot is used")
	assert.Equal(t, encoded(t, m, fed(t, m, ids[:8])), encoded(t, m, got))
	joined := strings.Join(w, "\n")
	assert.Len(t, w, 4, joined)
	assert.Contains(t, joined, "junk.k3p")
	assert.Contains(t, joined, "checksum mismatch")
	assert.Contains(t, joined, fileName("", ids[:20])+": not a prompt-cache entry of this model")
	_, err = os.Stat(path(16))
	assert.True(t, os.IsNotExist(err), "a damaged entry is removed")
}

// TestPartitionsNeverCross: a snapshot kept in one partition is not found
// from another, in memory or from disk after a restart.
func TestPartitionsNeverCross(t *testing.T) {
	m := openModel(t, "tiny-release")
	ids := prompt(t)
	dir := t.TempDir()
	c, err := Open(m, Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30})
	require.NoError(t, err)
	keepN(t, m, c, "key:alice", ids, 20)
	keepN(t, m, c, "", ids, 10)
	for _, cc := range []*Cache{c, mustOpen(t, m, dir)} {
		assert.Nil(t, cc.Longest("key:bob", ids, len(ids)))
		assert.Equal(t, 20, cc.Longest("key:alice", ids, len(ids)).Pos)
		assert.Equal(t, 10, cc.Longest("", ids, len(ids)).Pos)
	}
	// a file moved to another partition's name is refused by its header
	require.NoError(t, os.Rename(filepath.Join(ModelDir(dir, m), fileName("key:alice", ids[:20])), filepath.Join(ModelDir(dir, m), fileName("key:bob", ids[:20]))))
	var w warnings
	again, err := Open(m, Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30, Warn: w.add})
	require.NoError(t, err)
	assert.Nil(t, again.Longest("key:bob", ids, len(ids)))
	assert.Len(t, w, 1)
}

func mustOpen(t *testing.T, m *engine.Model, dir string) *Cache {
	c, err := Open(m, Options{Dir: dir, RAMBytes: 0, DiskBytes: 1 << 30})
	require.NoError(t, err)
	return c
}

// TestClearDir: clearing removes every entry file and reports them.
func TestClearDir(t *testing.T) {
	m := openModel(t, "tiny-release")
	ids := prompt(t)
	dir := t.TempDir()
	c := mustOpen(t, m, dir)
	keepN(t, m, c, "", ids, 5, 6)
	fs := Files(dir)
	require.Len(t, fs, 2)
	n, b, err := ClearDir(dir)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, fs[0].Size+fs[1].Size, b)
	assert.Empty(t, Files(dir))
}
