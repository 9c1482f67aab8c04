package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// noteLabel is a line of the chat (a notice, the phase) that takes no room
// while it says nothing: an empty label keeps a blank line's height, which
// left a band under the messages at 1024x640.
type noteLabel struct {
	widget.Label
	// changed, when set, is called after SetText (the chat's status line
	// shows or hides its row)
	changed func()
}

// newNoteLabel is an empty, hidden note; wrap wraps its words, else a long
// text ends with "…".
func newNoteLabel(wrap bool) *noteLabel {
	l := &noteLabel{}
	l.ExtendBaseWidget(l)
	if wrap {
		l.Wrapping = fyne.TextWrapWord
	} else {
		l.Truncation = fyne.TextTruncateEllipsis
	}
	l.Hide()
	return l
}

// SetText shows text, and hides the note when text is empty.
func (l *noteLabel) SetText(text string) {
	l.Label.SetText(text)
	if text == "" {
		l.Hide()
	} else {
		l.Show()
	}
	if l.changed != nil {
		l.changed()
	}
}
