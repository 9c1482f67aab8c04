package gui

import (
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// G18: the app keeps the server's API key out of its preferences: in a
// file only the user can read where no keychain runs (as here), and moves
// a key an older k3 left in the preferences.
func TestServerKeyKeptOutOfThePreferences(t *testing.T) {
	a := test.NewTempApp(t)
	a.Preferences().SetString("server.key", "sk-old") // an older k3 wrote it here
	u := newTestUIOn(t, a, nil)
	assert.Equal(t, "sk-old", u.S.ServerKey)
	assert.Equal(t, "", a.Preferences().String("server.key"), "the plain-text key stays in the preferences")

	u.S.Backend, u.S.ServerURL, u.S.ServerKey = bridge.BackendServer, "http://h/v1", "sk-new"
	require.NoError(t, u.SaveSettings())
	assert.Equal(t, "", a.Preferences().String("server.key"))
	fi, err := os.Stat(filepath.Join(u.B.DataDir, "secrets", bridge.ServerKeyFor("http://h/v1")))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// the next start reads it back
	w := test.NewTempWindow(t, nil)
	u2 := newAppUI(a, w, u.B)
	assert.Equal(t, "sk-new", u2.S.ServerKey)
}
