package keys

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mapKeyring is a keychain that answers (or, with fail, one that is not
// there, as under Xvfb without a Secret Service).
type mapKeyring struct {
	m    map[string]string
	fail bool
}

func (k *mapKeyring) Get(s, u string) (string, error) {
	if k.fail {
		return "", errors.New("no Secret Service")
	}
	v, ok := k.m[s+"/"+u]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

func (k *mapKeyring) Set(s, u, p string) error {
	if k.fail {
		return errors.New("no Secret Service")
	}
	k.m[s+"/"+u] = p
	return nil
}

func (k *mapKeyring) Delete(s, u string) error {
	if k.fail {
		return errors.New("no Secret Service")
	}
	delete(k.m, s+"/"+u)
	return nil
}

// Without a keychain the secret is in a 0600 file in a 0700 folder.
func TestStoreFallsBackToAPrivateFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	for _, kr := range []Keyring{nil, &mapKeyring{fail: true}} {
		s := Store{Keyring: kr, Dir: dir}
		got, err := s.Get("server-api-key")
		require.NoError(t, err)
		assert.Equal(t, "", got)
		require.NoError(t, s.Set("server-api-key", "sk-123"))
		fi, err := os.Stat(filepath.Join(dir, "server-api-key"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
		got, err = s.Get("server-api-key")
		require.NoError(t, err)
		assert.Equal(t, "sk-123", got)
		assert.Contains(t, s.Where("server-api-key"), "a file only you can read")
		require.NoError(t, s.Set("server-api-key", ""))
		_, err = os.Stat(filepath.Join(dir, "server-api-key"))
		assert.ErrorIs(t, err, os.ErrNotExist)
	}
}

// With a keychain the secret goes there, and a file left from a time
// without one is removed.
func TestStoreUsesTheKeychain(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "k"), []byte("old"), 0o600))
	kr := &mapKeyring{m: map[string]string{}}
	s := Store{Keyring: kr, Dir: dir}
	require.NoError(t, s.Set("k", "new"))
	assert.Equal(t, "new", kr.m[Service+"/k"])
	_, err := os.Stat(filepath.Join(dir, "k"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the file copy stays after the keychain took the key")
	got, err := s.Get("k")
	require.NoError(t, err)
	assert.Equal(t, "new", got)
	assert.Equal(t, "the system keychain", s.Where("k"))
	require.NoError(t, s.Delete("k"))
	assert.Empty(t, kr.m)
}
