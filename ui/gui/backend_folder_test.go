package gui

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// G20: "Model location…" changes the model folder without the wizard: a
// folder used before comes back with its trunk, another one runs without
// a trunk (and the chat says so), a folder with no model is refused.
func TestModelLocationChangesTheFolder(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	for _, d := range []string{a, b, c} {
		require.NoError(t, writeSmallModel(d))
	}
	trunkB := t.TempDir()
	u.S.ModelDir, u.S.TrunkDir, u.S.TrunkModel = b, trunkB, b
	require.NoError(t, u.SaveSettings()) // b was used with its trunk
	u.S.ModelDir, u.S.TrunkDir, u.S.TrunkModel = a, "", ""
	require.NoError(t, u.SaveSettings())
	ui(func() { v.Send("hi") })
	waitFor(t, "turn", func() bool { return !v.Busy })

	choose := func(dir string) {
		t.Helper()
		ui(func() {
			u.showBackendSettings()
			top := u.Win.Canvas().Overlays().Top()
			require.NotNil(t, top)
			e := findEntry(top, "the folder with config.json and the .safetensors files")
			require.NotNil(t, e, "the dialog has a model folder field")
			assert.Equal(t, u.S.ModelDir, e.Text)
			e.SetText(dir)
			tapDialog(t, u.Win, "Save")
		})
	}
	choose(b)
	ui(func() {
		assert.Equal(t, b, u.S.ModelDir)
		assert.Equal(t, trunkB, u.S.TrunkDir, "b comes back with its trunk")
		assert.Equal(t, b, bridge.LoadSettings(u.App.Preferences()).ModelDir, "saved")
		require.NotNil(t, u.Chat)
		assert.Nil(t, u.Chat.Info, "the next message opens b")
		assert.Equal(t, "", u.Chat.Notice.Text)
	})
	choose(c)
	ui(func() {
		assert.Equal(t, c, u.S.ModelDir)
		assert.Equal(t, "", u.S.TrunkDir)
		assert.Contains(t, u.Chat.Notice.Text, "The model folder c has no packed trunk yet")
	})
	empty := t.TempDir()
	choose(empty)
	ui(func() {
		assert.Equal(t, c, u.S.ModelDir, "a folder with no model is refused")
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top, "and the reason is shown")
		assert.NotNil(t, findLabelContaining(top, "There is no checkpoint in "+empty+" (no config.json)."))
	})
}
