package gui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// N10: Help has a guide (what each step does, where the files are) and
// the keys, besides About. Export suggests "work.md" for a title ending
// in a full stop, not "work..md".
func TestHelpGuideAndKeys(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(func() {
		var items []string
		for _, it := range u.helpMenu().Items {
			items = append(items, it.Label)
		}
		assert.Equal(t, []string{"Guide", "Keys", "", "About k3"}, items)
		g := u.guideText()
		for _, want := range []string{"1 This machine", "2 The model", "3 Pack the shared weights", "4 Memory", "5 Done", u.conversationsDir(), u.demoDir()} {
			assert.Contains(t, g, want)
		}
		for _, key := range []string{"Enter", "Shift+Enter", "Esc", "Ctrl+N", "Ctrl+F", "Tab"} {
			assert.Contains(t, keysText, key+":")
		}
		u.showGuide()
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top)
		assert.NotNil(t, findLabelContaining(top, "Where the files are"))
		assert.LessOrEqual(t, top.Size().Width, u.Win.Canvas().Size().Width)
	})
	assert.Equal(t, "Tell me a saying about work.md", exportName("Tell me a saying about work."))
	assert.Equal(t, "Notes.md", exportName("Notes"))
	assert.False(t, strings.Contains(exportName("a..."), ".."))
}
