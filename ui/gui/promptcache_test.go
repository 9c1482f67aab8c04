package gui

import (
	"os"
	"path/filepath"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/promptcache"
)

// The app's tests keep out of the user's prompt cache.
func init() { os.Setenv(promptcache.Env, "off") }

// TestSavedPromptsRow: the settings row says what the saved prompts take
// and Clear deletes them.
func TestSavedPromptsRow(t *testing.T) {
	test.NewTempApp(t)
	dir := t.TempDir()
	t.Setenv(promptcache.Env, dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "model"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model", "a.k3p"), make([]byte, 1500), 0o600))
	item := savedPromptsItem()
	row := item.Widget.(*fyne.Container)
	label := row.Objects[0].(*widget.Label)
	assert.Equal(t, "1 saved, 1.50 KB on disk", label.Text)
	test.Tap(row.Objects[1].(*widget.Button))
	assert.Equal(t, "none saved", label.Text)
	_, err := os.Stat(filepath.Join(dir, "model", "a.k3p"))
	assert.True(t, os.IsNotExist(err))
}
