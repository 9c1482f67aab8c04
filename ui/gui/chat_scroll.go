package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
)

// The conversation's scrolling (issue 27, G5 and G6). Wrapped text knows
// its height only once it is laid out at its width, and the desktop driver
// lays out on its next frame: a scroll to the end made before that stopped
// short of the end (the last line and the numbers below the edge), a
// thinking box that grew while streaming kept its old height, and after a
// long pasted message the view no longer counted as "at the end", so it did
// not follow the reply. So the list is laid out here, at the scroll area's
// width, until its height settles, before the view scrolls or measures.

// layoutList lays the messages out at the scroll area's width until their
// height no longer changes, and gives the scroll area the new height.
func (v *chatView) layoutList() {
	s := v.scroller
	for range 4 {
		before := v.Msgs.MinSize()
		size := before.Max(s.Size())
		v.Msgs.Resize(size)
		// the list's own size may be unchanged while a message in it grew
		v.Msgs.Layout.Layout(v.Msgs.Objects, size)
		if v.Msgs.MinSize() == before {
			break
		}
	}
}

// scrollToEnd shows the last line, once the list is laid out.
func (v *chatView) scrollToEnd() {
	v.layoutList()
	v.scroller.ScrollToBottom()
}

// keepEnd is the scroll area as the chat lays it out: when the area
// changes size (a notice or the phase line under it gained or lost a line,
// the window was resized) on a later frame, a view that showed the end
// shows it again (G6: the reply's last line and its numbers ended below
// the edge in the real window). A wheel turned up lets go of the end.
func (v *chatView) keepEnd() fyne.CanvasObject {
	return container.New(endKeeper{v}, v.scroller)
}

// endShown reports whether the view shows the end of the list as it was
// last laid out (what the user sees, before anything grew).
func (v *chatView) endShown() bool {
	s := v.scroller
	return s.Offset.Y+s.Size().Height >= v.Msgs.Size().Height-1
}

// following reports whether a streamed reply should keep the end in view.
func (v *chatView) following() bool { return v.endShown() || v.atEnd() }

type endKeeper struct{ v *chatView }

func (k endKeeper) MinSize(objs []fyne.CanvasObject) fyne.Size { return objs[0].MinSize() }

func (k endKeeper) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	end := k.v.endShown()
	objs[0].Move(fyne.Position{})
	objs[0].Resize(size)
	if end {
		k.v.layoutList()
		k.v.scroller.ScrollToBottom()
	}
}

// atEnd reports whether the view shows the last line (a user who scrolled
// up to read is not pulled down).
func (v *chatView) atEnd() bool {
	return v.scroller.Offset.Y+v.scroller.Size().Height >= v.Msgs.MinSize().Height-40
}

// relayout lays the conversation out again after mv changed shape (its
// thinking grew or folded, a note or its numbers appeared); a view that
// showed the end goes on showing it. The desktop driver does so only on
// the next frame, and after the last change of a stopped reply no frame
// came: its numbers stayed drawn over its thinking (and the next messages
// over both) until something else moved (G1).
func (v *chatView) relayout(mv *messageView) {
	follow := v.atEnd()
	v.layoutList()
	mv.Root.Refresh()
	v.layoutList()
	v.settle(follow)
}

// grew lays the list out after a streamed message gained a line (G5: a
// thinking box stayed 2 lines high while it streamed, and the chat could
// not scroll to the rest).
func (v *chatView) grew(*messageView) {
	follow := v.atEnd()
	v.layoutList()
	v.settle(follow)
}

// settle shows the end again when the view showed it, else keeps the place
// read and gives the scroll bar the new height.
func (v *chatView) settle(follow bool) {
	if follow {
		v.scroller.ScrollToBottom()
		return
	}
	at := v.scroller.Offset
	v.scroller.Offset = fyne.NewPos(at.X, at.Y-1)
	v.scroller.ScrollToOffset(at)
}
