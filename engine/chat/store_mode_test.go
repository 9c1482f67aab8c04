//go:build unix

package chat

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
)

// Audit N5 (H4): the conversations folder the app creates is 0700 and
// what it saves there (histories, their settings) is 0600, even under a
// permissive umask; a history the user made 0640 stays 0640.
func TestConversationsArePrivate(t *testing.T) {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	c := Store{Dir: filepath.Join(t.TempDir(), "k3", "conversations")}
	title, err := c.New("Private")
	require.NoError(t, err)
	require.NoError(t, c.Save(title, []Message{{Role: "user", Content: "my medical record"}, {Role: "assistant", Content: "ok"}}))
	require.NoError(t, c.SaveOptions(title, Options{Effort: "low", Sampling: engine.Sampling{Seed: 1}}))

	mode := func(p string) os.FileMode {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		return fi.Mode().Perm()
	}
	assert.Equal(t, os.FileMode(0o700), mode(c.Dir))
	assert.Equal(t, os.FileMode(0o700), mode(filepath.Dir(c.Dir)), "the parents it creates too")
	assert.Equal(t, os.FileMode(0o600), mode(c.path(title)))
	assert.Equal(t, os.FileMode(0o600), mode(c.optionsPath(title)))

	require.NoError(t, os.Chmod(c.path(title), 0o640))
	require.NoError(t, c.Save(title, []Message{{Role: "user", Content: "again"}, {Role: "assistant", Content: "ok"}}))
	assert.Equal(t, os.FileMode(0o640), mode(c.path(title)), "a file's own mode is kept")
}
