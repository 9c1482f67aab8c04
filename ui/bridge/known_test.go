package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/keys"
)

// The model folders used before are remembered newest first, once each,
// with their trunk and layer count; folders gone from the disk drop out;
// Use makes one the settings' model again.
func TestKnownModels(t *testing.T) {
	p := memPrefs{}
	root := t.TempDir()
	dirs := map[string]string{}
	for _, n := range []string{"a", "b"} {
		dirs[n] = filepath.Join(root, n)
		require.NoError(t, os.MkdirAll(dirs[n], 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dirs[n], "config.json"), []byte("{}"), 0o644))
	}
	trunk := t.TempDir()
	s := DefaultSettings()
	s.ModelDir, s.TrunkDir, s.TrunkModel, s.Layers = dirs["a"], trunk, dirs["a"], 4
	RememberModel(p, s)
	s = DefaultSettings()
	s.ModelDir = filepath.Join(root, "gone")
	RememberModel(p, s)
	s.ModelDir = dirs["b"]
	RememberModel(p, s)
	s.ModelDir = dirs["a"] + string(filepath.Separator) // the same folder
	RememberModel(p, s)
	assert.Equal(t, []KnownModel{{Dir: dirs["a"] + string(filepath.Separator)}, {Dir: dirs["b"]}}, LoadKnownModels(p))

	RememberModel(p, Settings{}) // no model: nothing changes
	assert.Len(t, LoadKnownModels(p), 2)

	var u Settings
	u.Backend = BackendServer
	s = DefaultSettings()
	s.ModelDir, s.TrunkDir, s.TrunkModel, s.Layers = dirs["b"], trunk, dirs["b"], 4
	RememberModel(p, s)
	k := LoadKnownModels(p)[0]
	assert.Equal(t, KnownModel{Dir: dirs["b"], Layers: 4, TrunkDir: trunk, TrunkModel: dirs["b"]}, k)
	u.Use(k)
	assert.Equal(t, BackendLocal, u.Backend)
	assert.Equal(t, dirs["b"], u.ModelDir)
	assert.Equal(t, trunk, u.TrunkDir)
	assert.Equal(t, 4, u.Layers)

	// a trunk of another model is not remembered with this one; a damaged
	// list is an empty one
	s.TrunkModel = dirs["a"]
	got, ok := s.Known()
	require.True(t, ok)
	assert.Equal(t, "", got.TrunkDir)
	p[kKnownModels] = "{broken"
	assert.Empty(t, LoadKnownModels(p))
}

// Issue 27 item 3: the servers used are remembered newest first, each with
// its model, once each (address and model), only while the model runs
// there; a full list forgets the oldest address. No key is in the list.
func TestKnownServers(t *testing.T) {
	p := memPrefs{}
	s := DefaultSettings()
	s.ServerURL, s.ServerModel, s.ServerKey = "http://a:8000/v1", "m1", "sk-a"
	assert.Empty(t, RememberServer(p, s))
	assert.Empty(t, LoadKnownServers(p), "a server not in use is not remembered")
	s.Backend = BackendServer
	RememberServer(p, s)
	s.ServerURL, s.ServerModel, s.ServerKey = "http://b:8000/v1", "", "sk-b"
	RememberServer(p, s)
	s.ServerURL, s.ServerModel = "http://a:8000/v1", "m2" // the same server, another model
	RememberServer(p, s)
	s.ServerURL, s.ServerModel = "http://b:8000/v1", ""
	RememberServer(p, s)
	assert.Equal(t, []KnownServer{{URL: "http://b:8000/v1"}, {URL: "http://a:8000/v1", Model: "m2"}, {URL: "http://a:8000/v1", Model: "m1"}},
		LoadKnownServers(p))
	assert.NotContains(t, p[kKnownServers], "sk-", "no key in the preferences")

	var u Settings
	u.UseServer(LoadKnownServers(p)[1], "sk-a")
	assert.Equal(t, Settings{Backend: BackendServer, ServerURL: "http://a:8000/v1", ServerModel: "m2", ServerKey: "sk-a"}, u)

	// the list keeps maxKnownServers; an address that drops out is named
	var forgotten []string
	for i := range maxKnownServers - 2 {
		s.ServerURL, s.ServerModel = fmt.Sprintf("http://h%d/v1", i), ""
		forgotten = append(forgotten, RememberServer(p, s)...)
	}
	assert.Len(t, LoadKnownServers(p), maxKnownServers)
	assert.Empty(t, forgotten, "http://a:8000/v1 is still there with m2")
	s.ServerURL = "http://last/v1"
	assert.Equal(t, []string{"http://a:8000/v1"}, RememberServer(p, s), "its last entry went")
	p[kKnownServers] = "{broken"
	assert.Empty(t, LoadKnownServers(p))
}

// Each server keeps its own API key; the one key of an app that knew one
// server is the key of the server in use then, and moves to its name.
func TestServerKeysPerServer(t *testing.T) {
	p := memPrefs{}
	ks := keys.Store{Dir: filepath.Join(t.TempDir(), "secrets")}
	require.NoError(t, ks.Set(ServerKeyName, "sk-one"))
	got, err := LoadServerKey(p, ks, "http://a/v1")
	require.NoError(t, err)
	assert.Equal(t, "sk-one", got)
	old, err := ks.Get(ServerKeyName)
	require.NoError(t, err)
	assert.Equal(t, "", old, "the old name is removed")
	require.NoError(t, SaveServerKey(ks, "http://b/v1", "sk-b"))
	for url, want := range map[string]string{"http://a/v1": "sk-one", "http://b/v1": "sk-b", "http://c/v1": ""} {
		got, err := LoadServerKey(p, ks, url)
		require.NoError(t, err)
		assert.Equal(t, want, got, url)
	}
	assert.NotEqual(t, ServerKeyFor("http://a/v1"), ServerKeyFor("http://b/v1"))
}
