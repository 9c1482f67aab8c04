package gui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
	"k3/ui/bridge"
)

// G10: the trunk folder suggested for a model is <home>/k3-trunk/<model>
// on the fastest disk, never inside another model's trunk folder (it was
// …/k3-trunk/demo-model-52daca/k3-trunk/large-5e3021) or a model folder.
func TestTrunkSuggestionNeverNested(t *testing.T) {
	root := t.TempDir()
	t.Setenv("HOME", filepath.Join(root, "home"))
	model := modelFolder(t, root, "large", false)
	demoTrunk := filepath.Join(root, "disk", bridge.TrunkFolderName, "demo-model-52daca")
	require.NoError(t, os.MkdirAll(demoTrunk, 0o755))
	otherModel := modelFolder(t, filepath.Join(root, "disk2"), "kimi-k3", false)
	for _, tc := range []struct{ measured, base string }{
		{demoTrunk, filepath.Join(root, "disk")},
		{otherModel, filepath.Join(root, "disk2")},
		{filepath.Join(root, "home", "data", "k3"), filepath.Join(root, "home")},
	} {
		r := &doctor.Report{Disks: []doctor.DiskResult{{Path: tc.measured, FreeBytes: 100e9, SeqGBps: f64p(3)}}}
		dir, why := suggestTrunkDir(r, 1e9, model, filepath.Join(root, "appdata"))
		require.NotEmpty(t, dir, why)
		assert.Equal(t, bridge.DefaultTrunkDir(tc.base, model), dir, "measured %s", tc.measured)
		assert.Equal(t, 1, strings.Count(dir, bridge.TrunkFolderName), "nested: %s", dir)
		assert.True(t, strings.HasPrefix(filepath.Base(dir), "large-"), dir)
	}
}
