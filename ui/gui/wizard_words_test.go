package gui

import (
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labelsUnder are the texts of the visible labels and buttons under o.
func labelsUnder(o fyne.CanvasObject) []string {
	var out []string
	findVisible(o, func(x fyne.CanvasObject) bool {
		switch w := x.(type) {
		case *widget.Label:
			out = append(out, w.Text)
		case *widget.Button:
			out = append(out, w.Text)
		}
		return false
	})
	return out
}

// Step 2 does not promise that Verify checks a copied folder's contents
// (it compares them only where k3 downloaded the folder and keeps their
// checksums); step 3 speaks of "the shared weights", not of a "trunk"
// (G26), but for the one sentence that says k3 calls them so.
func TestWizardWordsSteps2And3(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	dir := filepath.Join(t.TempDir(), "small")
	require.NoError(t, writeSmallModel(dir))
	require.NoError(t, unmarkDemo(dir))
	ui(u.Start)
	w := u.wizard
	ui(func() {
		w.Go(1)
		w.Model.Dir.SetText(dir)
	})
	waitFor(t, "folder check", func() bool { return w.Model.Check != nil && w.Model.checkJob == nil })
	ui(func() {
		st := w.Model.Status.Text
		assert.Contains(t, st, "A checkpoint is here")
		assert.NotContains(t, st, "Verify checks their contents")
		assert.Contains(t, st, "compares their contents only in a folder k3 downloaded")
		w.Go(2)
	})
	waitFor(t, "pack step", func() bool { return w.Pack.checkJob == nil })
	ui(func() {
		assert.Equal(t, "Pack the shared weights", w.Pack.Title())
		var trunk []string
		for _, s := range labelsUnder(w.Pack.view) {
			if strings.Contains(strings.ToLower(s), "trunk") {
				trunk = append(trunk, s)
			}
		}
		require.Len(t, trunk, 1, "%q", trunk)
		assert.Contains(t, trunk[0], "k3 calls it the trunk")
	})
}
