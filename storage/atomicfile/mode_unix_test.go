//go:build unix

package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withUmask runs f under umask mask (the umask is the process's: these
// tests are not parallel).
func withUmask(mask int, f func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	f()
}

func perm(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func TestWriteKeepsAnExistingFilesMode(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []fs.FileMode{0o600, 0o640, 0o604, 0o755} {
		p := filepath.Join(dir, fmt.Sprintf("f%o", m))
		require.NoError(t, os.WriteFile(p, []byte("old"), 0o600))
		require.NoError(t, os.Chmod(p, m))
		withUmask(0o022, func() {
			require.NoError(t, Write(p, []byte("new")))
			require.NoError(t, WritePrivate(p, []byte("newer")))
			require.NoError(t, WriteDurable(p, []byte("newest")))
		})
		assert.Equal(t, m, perm(t, p), "mode of %s", p)
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.Equal(t, "newest", string(got))
	}
}

func TestNewFilesHonourTheUmask(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		mask      int
		plain, pv fs.FileMode
	}{{0o022, 0o644, 0o600}, {0o077, 0o600, 0o600}, {0o002, 0o664, 0o600}, {0o027, 0o640, 0o600}}
	for _, c := range cases {
		a := filepath.Join(dir, fmt.Sprintf("plain%o", c.mask))
		b := filepath.Join(dir, fmt.Sprintf("private%o", c.mask))
		n := filepath.Join(dir, fmt.Sprintf("new%o", c.mask))
		withUmask(c.mask, func() {
			require.NoError(t, Write(a, []byte("x")))
			require.NoError(t, WritePrivate(b, []byte("x")))
			require.NoError(t, WriteNew(n, []byte("x"), 0o600))
		})
		assert.Equal(t, c.plain, perm(t, a), "umask %o", c.mask)
		assert.Equal(t, c.pv, perm(t, b), "umask %o", c.mask)
		assert.Equal(t, c.pv, perm(t, n), "umask %o", c.mask)
	}
}

func TestWriteNewNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	require.NoError(t, WriteNew(p, []byte("first"), 0o600))
	err := WriteNew(p, []byte("second"), 0o600)
	require.ErrorIs(t, err, fs.ErrExist)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "first", string(got))

	// 16 writers race for the same 4 names: each name is won exactly
	// once, by a complete file, and nothing else is left in the folder
	var mu sync.Mutex
	won := map[string]string{}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				name := filepath.Join(dir, fmt.Sprintf("n%d", i))
				body := fmt.Sprintf("writer %d for %d", w, i)
				if err := WriteNew(name, []byte(body), 0o600); err == nil {
					mu.Lock()
					require.Empty(t, won[name], "%s won twice", name)
					won[name] = body
					mu.Unlock()
				} else {
					assert.ErrorIs(t, err, fs.ErrExist)
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, won, 4)
	for name, body := range won {
		got, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.Equal(t, body, string(got))
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 5, "temporary files left behind")
}
