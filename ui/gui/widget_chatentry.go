package gui

import (
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
	e.Entry.TypedShortcut(s)
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
