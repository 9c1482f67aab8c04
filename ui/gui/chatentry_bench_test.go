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
func benchPaste(b *testing.B, wrap fyne.TextWrap) {
	test.NewTempApp(b)
	text := pasteText()
	e := newChatEntry()
	e.Wrapping = wrap
	e.SetMinRowsVisible(3)
	w := test.NewTempWindow(b, e)
	w.Resize(fyne.NewSize(420, 120))
	cb := test.NewClipboard()
	cb.SetContent(text)
	b.ResetTimer()
	for range b.N {
		e.SetText("")
		e.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		if len(e.Text) != len(text) {
			b.Fatalf("pasted %d of %d bytes", len(e.Text), len(text))
		}
	}
}

// BenchmarkPaste5000Words: word wrapping (the message box as it is) against
// no wrapping, measured in the same run.
func BenchmarkPaste5000Words(b *testing.B) {
	b.Run("wrap=word", func(b *testing.B) { benchPaste(b, fyne.TextWrapWord) })
	b.Run("wrap=off", func(b *testing.B) { benchPaste(b, fyne.TextWrapOff) })
	b.Run("wrap=break", func(b *testing.B) { benchPaste(b, fyne.TextWrapBreak) })
}
