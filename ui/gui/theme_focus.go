package gui

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// appTheme is the default theme (in a fixed variant when fixed is set)
// with a focus colour that can be seen (G8): Fyne's default blends 16%
// of the primary blue over a focused button, which on the dark variant,
// and on the blue Send button at all, looks the same as not focused, so
// the Tab stops after the message box seemed to lead nowhere. The focus
// is a clear overlay instead: light on the dark variant, dark on the
// light one, different from the hover colour and from every button's own.
type appTheme struct {
	fyne.Theme
	fixed bool
	v     fyne.ThemeVariant
}

// Focus overlays per variant.
var (
	focusOnDark  = color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0x70}
	focusOnLight = color.NRGBA{R: 0x00, G: 0x00, B: 0x00, A: 0x48}
)

func (t appTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	if t.fixed {
		v = t.v
	}
	if n == theme.ColorNameFocus {
		if v == theme.VariantLight {
			return focusOnLight
		}
		return focusOnDark
	}
	return t.Theme.Color(n, v)
}
