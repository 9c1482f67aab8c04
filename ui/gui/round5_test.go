package gui

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"github.com/stretchr/testify/assert"
)

// A blank band about one line high sat under the messages at 1024x640: the
// empty notice and phase lines kept their height. An empty line takes no
// room; one with words takes its line, and gives it back when emptied.
func TestEmptyNoticeAndPhaseTakeNoRoom(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	d := fyne.CurrentApp().Driver()
	gap := func() float32 {
		relayout(u.Win)
		end := d.AbsolutePositionForObject(v.scroller).Y + v.scroller.Size().Height
		return d.AbsolutePositionForObject(v.Thinking).Y - end
	}
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 600))
		assert.Equal(t, "", v.Notice.Text)
		assert.Equal(t, "", v.Phase.Text)
		assert.False(t, v.Notice.Visible())
		assert.False(t, v.Phase.Visible())
		assert.False(t, v.Estimate.Visible())
		empty := gap()
		assert.LessOrEqual(t, empty, 2*theme.Padding(), "a blank band under the messages")
		v.Notice.SetText("A notice.")
		assert.True(t, v.Notice.Visible())
		assert.Greater(t, gap(), empty+v.Notice.MinSize().Height-1, "a notice takes its line")
		v.Notice.SetText("")
		v.Phase.SetText("reading prompt 3/10")
		assert.True(t, v.Phase.Visible())
		assert.Greater(t, gap(), empty+v.Phase.MinSize().Height-1)
		v.Phase.SetText("")
		assert.Equal(t, empty, gap(), "the line is given back")
	})
}
