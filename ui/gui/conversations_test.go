package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// N8: Esc in the search clears it (the list showed only "No conversation
// matches." until the field was cleared by hand) and gives the keys back
// to the message box. G21: a title cut with "…" shows whole under the
// pointer.
func TestSearchEscAndCutTitles(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	long := "Tell me a saying about time and about the long winter nights"
	ui(func() { v.Send(long) })
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		c := u.Win.Canvas()
		all := v.Convs.Shown()
		require.NotEmpty(t, all)
		c.Focus(v.Convs.Query)
		v.Convs.Query.SetText("zzzz")
		assert.True(t, v.Convs.NoMatch.Visible())
		v.Convs.Query.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		assert.Equal(t, "", v.Convs.Query.Text)
		assert.False(t, v.Convs.NoMatch.Visible())
		assert.Equal(t, all, v.Convs.Shown())
		assert.Equal(t, v.Entry, c.Focused(), "the message box does not take the keys again")

		u.Win.Resize(fyne.NewSize(1024, 640))
		title := findVisible(v.Convs.Root, func(l *tipLabel) bool { return strings.HasPrefix(l.Text, "Tell me a saying") })
		require.NotNil(t, title)
		require.True(t, title.cut(), "the test needs a cut title (width %v)", title.Size().Width)
		title.MouseIn(&desktop.MouseEvent{})
		assert.Equal(t, title.Text, v.Convs.Tip.Shown())
		assert.Greater(t, v.Convs.Tip.text.Size().Height, title.Size().Height, "the whole title is wrapped to the column")
		title.MouseOut()
		assert.Equal(t, "", v.Convs.Tip.Shown())
	})
}
