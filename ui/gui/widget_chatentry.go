package gui

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// chatEntry is the message box: Enter sends, Shift+Enter starts a new line,
// Esc stops the reply being generated.
type chatEntry struct {
	widget.Entry
	shift  bool
	OnSend func()
	OnStop func()
	// OnTab moves the focus on (Tab types no tab: the keyboard reaches Send
	// and the other controls); OnShortcut gets Ctrl+N and Ctrl+F and
	// reports whether it used them.
	OnTab      func()
	OnShortcut func(fyne.Shortcut) bool
}

func (e *chatEntry) TypedShortcut(s fyne.Shortcut) {
	if e.OnShortcut != nil && e.OnShortcut(s) {
		return
	}
	if p, ok := s.(*fyne.ShortcutPaste); ok && p.Clipboard != nil {
		// before the paste: wrapping a long text costs seconds
		e.wrapFor(e.Text + p.Clipboard.Content())
	}
	e.Entry.TypedShortcut(s)
}

// longText is the length (bytes, about 1,300 words) above which the
// message box does not wrap its lines: with Fyne's word wrap a 5,000-word
// paste took 0.2-0.96 s in the test driver (4.5 s in the real window) and
// each letter typed after it 0.15-0.29 s, against 0.02-0.03 s and
// 0.02-0.09 s unwrapped, on a loaded 2-core machine
// (BenchmarkPaste5000Words, BenchmarkTypeAfterPaste). A long text scrolls
// sideways instead; it is sent as it is either way.
const longText = 8000

// longLine is the longest line (bytes) the box shows unwrapped: a line
// much wider than the screen is drawn as a black bar by the window's
// graphics (a 25,000-letter line was, at 1024x640), so a text with one
// is wrapped, slow as that is.
const longLine = 800

// wrapFor wraps the box's lines for text: by words, or not at all when
// it is long and its lines are not.
func (e *chatEntry) wrapFor(text string) {
	wrap := fyne.TextWrapWord
	if len(text) > longText && maxLine(text) <= longLine {
		wrap = fyne.TextWrapOff
	}
	if e.Wrapping != wrap {
		e.Wrapping = wrap
		e.Refresh()
	}
}

// maxLine is the length (bytes) of text's longest line.
func maxLine(text string) int {
	longest := 0
	for line := range strings.SplitSeq(text, "\n") {
		longest = max(longest, len(line))
	}
	return longest
}

// SetText sets the box's text, wrapped as its length allows.
func (e *chatEntry) SetText(text string) {
	e.wrapFor(text)
	e.Entry.SetText(text)
}

func newChatEntry() *chatEntry {
	e := &chatEntry{}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.SetPlaceHolder("Message Kimi K3 — Enter sends, Shift+Enter for a new line, Esc stops")
	e.ExtendBaseWidget(e)
	return e
}

func (e *chatEntry) KeyDown(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = true
	}
	e.Entry.KeyDown(k)
}

func (e *chatEntry) KeyUp(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = false
	}
	e.Entry.KeyUp(k)
}

func (e *chatEntry) TypedKey(k *fyne.KeyEvent) {
	switch k.Name {
	case fyne.KeyReturn, fyne.KeyEnter:
		if !e.shift {
			if e.OnSend != nil {
				e.OnSend()
			}
			return
		}
	case fyne.KeyTab:
		if e.OnTab != nil {
			e.OnTab()
			return
		}
	case fyne.KeyEscape:
		if e.OnStop != nil {
			e.OnStop()
		}
		return
	}
	e.Entry.TypedKey(k)
}
