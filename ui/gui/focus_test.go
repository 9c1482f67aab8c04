package gui

import (
	"image"
	"testing"

	"fyne.io/fyne/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// changedPixels counts the pixels of o's area (in the window) that differ
// by more than 40 levels (the three channels summed) between two captures.
func changedPixels(a, b image.Image, o fyne.CanvasObject) (changed, total int) {
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(o)
	sz := o.Size()
	scale := float32(a.Bounds().Dx()) / float32(1024)
	r := image.Rect(int(pos.X*scale), int(pos.Y*scale), int((pos.X+sz.Width)*scale), int((pos.Y+sz.Height)*scale)).Intersect(a.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			d := absDiff(r1, r2) + absDiff(g1, g2) + absDiff(b1, b2)
			if d>>8 > 40 {
				changed++
			}
			total++
		}
	}
	return changed, total
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// G8: every Tab stop of the chat window shows that it has the focus (it
// renders clearly otherwise than unfocused), in the dark and the light
// variant, and Tab goes from the message box to its own buttons first
// (Send, Picture…), then round the window and back to the box.
func TestTabStopsShowTheFocus(t *testing.T) {
	for _, variant := range []string{themeDark, themeLight} {
		t.Run(variant, func(t *testing.T) {
			fc := &fakeChat{gate: make(chan struct{})}
			u, v := chatUI(t, fc)
			ui(func() {
				u.SetTheme(variant)
				u.Win.Resize(fyne.NewSize(1024, 640))
				c := u.Win.Canvas()
				v.Entry.SetText("hello")
				c.Focus(v.Entry)
				var stops []fyne.Focusable
				v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyTab})
				for i := 0; i < 40 && c.Focused() != v.Entry; i++ {
					stops = append(stops, c.Focused())
					c.FocusNext()
				}
				require.GreaterOrEqual(t, len(stops), 5, "the Tab stops")
				assert.Equal(t, fyne.Focusable(v.SendBt), stops[0], "Tab from the message box goes to Send")
				for _, f := range stops {
					o := f.(fyne.CanvasObject)
					c.Focus(nil)
					before := c.Capture()
					c.Focus(f)
					after := c.Capture()
					n, total := changedPixels(before, after, o)
					assert.True(t, o.Visible() && total > 0, "%T is a Tab stop that cannot be seen", f)
					assert.Greater(t, n, min(total/20, 400), "%T (%v) does not show its focus: %d of %d pixels change", f, o.Size(), n, total)
				}
			})
		})
	}
}
