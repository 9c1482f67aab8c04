package gui

import "fyne.io/fyne/v2"

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
	if follow {
		v.scroller.ScrollToBottom()
		return
	}
	// the scroll bar gets the new height; the place read stays
	at := v.scroller.Offset
	v.scroller.Offset = fyne.NewPos(at.X, at.Y-1)
	v.scroller.ScrollToOffset(at)
}
