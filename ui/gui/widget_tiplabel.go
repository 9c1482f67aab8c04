package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// tipLabel is a one-line label that ends a text too long for it with
// "…"; while the pointer rests on it, its tipLayer shows the whole text
// (G21: conversation titles were cut with no way to read them).
type tipLabel struct {
	widget.Label
	layer *tipLayer
}

func newTipLabel(text string, layer *tipLayer) *tipLabel {
	l := &tipLabel{layer: layer}
	l.Text = text
	l.Truncation = fyne.TextTruncateEllipsis
	l.ExtendBaseWidget(l)
	return l
}

// cut reports whether the text is wider than the label shows.
func (l *tipLabel) cut() bool {
	th := l.Theme()
	full := fyne.MeasureText(l.Text, th.Size(theme.SizeNameText), l.TextStyle)
	return full.Width+2*th.Size(theme.SizeNameInnerPadding) > l.Size().Width
}

// MouseIn shows the whole text when it is cut.
func (l *tipLabel) MouseIn(*desktop.MouseEvent) {
	if l.layer != nil && l.Text != "" && l.cut() {
		l.layer.show(l)
	}
}

// MouseMoved keeps the tip.
func (l *tipLabel) MouseMoved(*desktop.MouseEvent) {}

// MouseOut hides the tip.
func (l *tipLabel) MouseOut() {
	if l.layer != nil {
		l.layer.hide()
	}
}

// tipLayer lies over a column (the conversation list) and shows a cut
// label's whole text, wrapped to the column's width, just under it. It
// takes no taps and no hover: what is under it works as before. (A
// pop-up would cover the window and take the next click.)
type tipLayer struct {
	Root *fyne.Container
	bg   *canvas.Rectangle
	text *widget.Label
}

func newTipLayer() *tipLayer {
	t := &tipLayer{bg: canvas.NewRectangle(theme.Color(theme.ColorNameOverlayBackground)), text: widget.NewLabel("")}
	t.bg.StrokeColor = theme.Color(theme.ColorNameInputBorder)
	t.bg.StrokeWidth = 1
	t.text.Wrapping = fyne.TextWrapWord
	t.Root = container.NewWithoutLayout(t.bg, t.text)
	t.hide()
	return t
}

// show shows l's whole text under l.
func (t *tipLayer) show(l *tipLabel) {
	d := fyne.CurrentApp().Driver()
	at := d.AbsolutePositionForObject(l).Subtract(d.AbsolutePositionForObject(t.Root))
	w := t.Root.Size().Width
	t.text.SetText(l.Text)
	t.text.Resize(fyne.NewSize(w, 0))
	h := t.text.MinSize().Height
	t.text.Resize(fyne.NewSize(w, h))
	t.text.Move(fyne.NewPos(0, at.Y+l.Size().Height))
	t.bg.Resize(t.text.Size())
	t.bg.Move(t.text.Position())
	t.bg.Show()
	t.text.Show()
	t.Root.Refresh()
}

func (t *tipLayer) hide() {
	t.bg.Hide()
	t.text.Hide()
}

// Shown is the text the tip shows ("" when hidden).
func (t *tipLayer) Shown() string {
	if !t.text.Visible() {
		return ""
	}
	return t.text.Text
}
