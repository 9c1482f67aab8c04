package gui

import (
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

// findVisible returns the first visible T under o (depth first through
// containers, scroll areas and widgets' renderers) for which match holds.
func findVisible[T fyne.CanvasObject](o fyne.CanvasObject, match func(T) bool) (zero T) {
	if o == nil || !o.Visible() {
		return zero
	}
	if x, ok := o.(T); ok && match(x) {
		return x
	}
	var kids []fyne.CanvasObject
	switch x := o.(type) {
	case *fyne.Container:
		kids = x.Objects
	case *container.Scroll:
		kids = []fyne.CanvasObject{x.Content}
	case fyne.Widget:
		kids = test.WidgetRenderer(x).Objects()
	}
	for _, k := range kids {
		if f := findVisible(k, match); any(f) != any(zero) {
			return f
		}
	}
	return zero
}

// findButton returns the visible button labelled text in o's tree.
func findButton(o fyne.CanvasObject, text string) *widget.Button {
	return findVisible(o, func(b *widget.Button) bool { return b.Text == text })
}

// findEntry returns the entry under o whose place holder is ph.
func findEntry(o fyne.CanvasObject, ph string) *widget.Entry {
	return findVisible(o, func(e *widget.Entry) bool { return e.PlaceHolder == ph })
}

// findLabelContaining returns a label under o whose text contains s.
func findLabelContaining(o fyne.CanvasObject, s string) *widget.Label {
	return findVisible(o, func(l *widget.Label) bool { return strings.Contains(l.Text, s) })
}
