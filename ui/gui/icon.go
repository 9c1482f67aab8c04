package gui

import (
	_ "embed"

	"fyne.io/fyne/v2"
)

// icon.png is a copy of assets/icon.png (the packaged icon, see FyneApp.toml).
//
//go:embed icon.png
var iconPNG []byte

var iconResource = fyne.NewStaticResource("icon.png", iconPNG)
