package bridge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
