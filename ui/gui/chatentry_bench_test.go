package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
)

// pasteText is about 5,000 words in lines of prose, as a pasted document.
func pasteText() string {
	words := strings.Fields("the model reads its prompt from the disk and answers one token at a time on the processor of this machine")
	var b strings.Builder
	for i := range 5000 {
		b.WriteString(words[i%len(words)])
		if i%60 == 59 {
			b.WriteString("\n")
		} else {
			b.WriteString(" ")
		}
	}
	return b.String()
}

// benchPaste pastes the text into a message box wrapped as wrap, laid out
// at the chat column's width at 1024x640, and measures the paste (its
// wrapping, the cursor's move to the end).
func benchPaste(b *testing.B, wrap fyne.TextWrap, fixed bool) {
	test.NewTempApp(b)
	text := pasteText()
	e := newChatEntry()
	e.Wrapping = wrap
	if fixed { // the wrapping stays as set, however long the text
		e.OnShortcut = func(s fyne.Shortcut) bool {
			e.Entry.TypedShortcut(s)
			return true
		}
	}
	e.SetMinRowsVisible(3)
	w := test.NewTempWindow(b, e)
	w.Resize(fyne.NewSize(420, 120))
	cb := test.NewClipboard()
	cb.SetContent(text)
	b.ResetTimer()
	for range b.N {
		e.Entry.SetText("")
		e.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		if len(e.Text) != len(text) {
			b.Fatalf("pasted %d of %d bytes", len(e.Text), len(text))
		}
	}
}

// benchTypeAfterPaste types one letter at the end of a pasted text.
func benchTypeAfterPaste(b *testing.B, wrap fyne.TextWrap) {
	test.NewTempApp(b)
	e := newChatEntry()
	e.Wrapping = wrap
	w := test.NewTempWindow(b, e)
	w.Resize(fyne.NewSize(420, 120))
	e.Entry.SetText(pasteText())
	e.CursorRow = len(strings.Split(e.Text, "\n")) - 1
	b.ResetTimer()
	for range b.N {
		e.TypedRune('x')
	}
}

func BenchmarkTypeAfterPaste(b *testing.B) {
	b.Run("wrap=word", func(b *testing.B) { benchTypeAfterPaste(b, fyne.TextWrapWord) })
	b.Run("wrap=off", func(b *testing.B) { benchTypeAfterPaste(b, fyne.TextWrapOff) })
}

// BenchmarkPaste5000Words: the message box as it is (no wrapping for a
// long text) against word wrapping, no wrapping and letter wrapping kept
// whatever the length, measured in the same run.
func BenchmarkPaste5000Words(b *testing.B) {
	b.Run("box", func(b *testing.B) { benchPaste(b, fyne.TextWrapWord, false) })
	b.Run("wrap=word", func(b *testing.B) { benchPaste(b, fyne.TextWrapWord, true) })
	b.Run("wrap=off", func(b *testing.B) { benchPaste(b, fyne.TextWrapOff, true) })
	b.Run("wrap=break", func(b *testing.B) { benchPaste(b, fyne.TextWrapBreak, true) })
}
