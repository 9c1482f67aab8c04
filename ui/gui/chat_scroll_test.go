package gui

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// assertLaidOut checks that o and everything in its containers is laid out
// at least as tall as it needs (what was not laid out yet keeps an old
// height: a wrapped label knows its height only at its width).
func assertLaidOut(t *testing.T, o fyne.CanvasObject, where string) {
	t.Helper()
	if !o.Visible() {
		return
	}
	assert.GreaterOrEqual(t, o.Size().Height+0.5, o.MinSize().Height, "%s: %T laid out shorter than it needs", where, o)
	if c, ok := o.(*fyne.Container); ok {
		for _, ch := range c.Objects {
			assertLaidOut(t, ch, where)
		}
	}
}

// bottomIn is the bottom of o in the list's coordinates.
func bottomIn(v *chatView, o fyne.CanvasObject) float32 {
	d := fyne.CurrentApp().Driver()
	return d.AbsolutePositionForObject(o).Y - d.AbsolutePositionForObject(v.Msgs).Y + o.Size().Height
}

// G6: after a reply whose lines wrap, and after a long pasted message, the
// view ends at the reply's last line and its numbers (it stopped short of
// the end: the scroll came before the list was laid out at its width).
func TestScrollShowsTheEndOfEachReply(t *testing.T) {
	long := strings.Repeat("This reply is long enough to wrap onto a second line in the chat column at this width. ", 3)
	fc := &fakeChat{reply: []string{long, long, long}}
	u, v := chatUI(t, fc)
	ui(func() { u.Win.Resize(fyne.NewSize(1024, 640)) })
	pasted := strings.Repeat("a pasted line of a long log file, wrapped as it comes, with words and more words to wrap\n", 60)
	for i, msg := range []string{"first question", "second question", pasted, "after the paste"} {
		ui(func() { v.Send(msg) })
		waitFor(t, "the reply", func() bool { return !v.Busy })
		ui(func() {
			last := v.Views[len(v.Views)-1]
			require.True(t, last.statsLbl.Visible(), "reply %d has its numbers", i)
			assertLaidOut(t, v.Msgs, "the list")
			end := bottomIn(v, last.statsLbl)
			assert.InDelta(t, v.Msgs.Size().Height, bottomIn(v, last.Root), 1, "reply %d: the list is as tall as its messages", i)
			assert.GreaterOrEqual(t, v.scroller.Offset.Y+v.scroller.Size().Height+0.5, end,
				"reply %d: the numbers under the reply are in view", i)
			assert.True(t, v.atEnd(), "reply %d: the view counts as at the end, so it follows the next reply", i)
		})
	}

	// while a reply to a long pasted message streams, the view follows it
	fc.gate = make(chan struct{})
	ui(func() { v.Send(pasted) })
	for range 2 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "two pieces", func() bool { return strings.Count(v.Views[len(v.Views)-1].Answer, long) == 2 })
	ui(func() {
		last := v.Views[len(v.Views)-1]
		assertLaidOut(t, v.Msgs, "the list while streaming")
		assert.GreaterOrEqual(t, v.scroller.Offset.Y+v.scroller.Size().Height+0.5, bottomIn(v, last.body),
			"the streamed text is in view")
	})
	fc.gate <- struct{}{}
	waitFor(t, "the reply", func() bool { return !v.Busy })

	// the area gets shorter on a later frame (here the window; in the real
	// window a notice or the phase line under it gaining a line): the end
	// stays in view (it ended 13 and 40 px below the edge under Xvfb)
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 520))
		last := v.Views[len(v.Views)-1]
		assert.GreaterOrEqual(t, v.scroller.Offset.Y+v.scroller.Size().Height+0.5, bottomIn(v, last.statsLbl),
			"the numbers under the last reply stay in view")
		v.scroller.ScrollToTop() // a user reading above
		u.Win.Resize(fyne.NewSize(1024, 640))
		assert.Zero(t, v.scroller.Offset.Y, "is not pulled down")
	})
}

// G5: a thinking box grows while it streams (it stayed 2 lines high) and
// the chat can scroll to what it adds.
func TestThinkingGrowsWhileItStreams(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() { u.Win.Resize(fyne.NewSize(1024, 640)) })
	ui(func() {
		for range 6 {
			v.addView(chat.Message{Role: "user", Content: strings.Repeat("an earlier message that fills the view\n", 4)})
		}
		v.rebuild(len(v.Views))
		v.scrollToEnd()
		mv := v.addView(chat.Message{Role: "assistant"})
		mv.StartStream(time.Now())
		v.scrollToEnd()
		v.scroller.ScrollToTop() // the user reads further up: the view need not follow
		var rows []float32
		for i := range 30 {
			mv.Append(strings.Repeat("thinking about the question, step by step, word by word. ", 2)+"\n", "")
			if i%10 == 9 {
				rows = append(rows, mv.think.Size().Height)
			}
		}
		assertLaidOut(t, v.Msgs, "the list while thinking")
		assert.Less(t, rows[0], rows[1], "the thinking box grows")
		assert.Less(t, rows[1], rows[2], "the thinking box grows")
		assert.GreaterOrEqual(t, v.Msgs.Size().Height+0.5, bottomIn(v, mv.Root), "the chat can scroll to the end of the thinking")
		assert.Zero(t, v.scroller.Offset.Y, "a user reading above is not pulled down")
		v.scroller.ScrollToBottom()
		assert.GreaterOrEqual(t, v.scroller.Offset.Y+v.scroller.Size().Height+0.5, bottomIn(v, mv.thinkBox))
	})
}
