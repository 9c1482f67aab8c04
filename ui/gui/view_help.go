package gui

import (
	"image/color"
	"net/url"
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Version is the app's version, shown in Help → About (main sets it to the
// CLI's version: the app and `k3 version` are one program).
var Version = "dev"

// Theme choices (View → Theme), kept in the preferences.
const (
	themeSystem = "system"
	themeLight  = "light"
	themeDark   = "dark"
	kTheme      = "view.theme"
	kGauges     = "view.gauges" // bool: the Engine panel is hidden
)

// variantTheme is the default theme in a fixed light or dark variant.
type variantTheme struct {
	fyne.Theme
	v fyne.ThemeVariant
}

func (t variantTheme) Color(n fyne.ThemeColorName, _ fyne.ThemeVariant) color.Color {
	return t.Theme.Color(n, t.v)
}

// SetTheme applies a theme choice and keeps it.
func (u *appUI) SetTheme(choice string) {
	switch choice {
	case themeLight:
		u.App.Settings().SetTheme(variantTheme{theme.DefaultTheme(), theme.VariantLight})
	case themeDark:
		u.App.Settings().SetTheme(variantTheme{theme.DefaultTheme(), theme.VariantDark})
	default:
		choice = themeSystem
		u.App.Settings().SetTheme(theme.DefaultTheme())
	}
	u.App.Preferences().SetString(kTheme, choice)
}

// themeChoice is the kept theme choice.
func (u *appUI) themeChoice() string {
	return u.App.Preferences().StringWithFallback(kTheme, themeSystem)
}

// viewMenu is View: the theme and the Engine panel.
func (u *appUI) viewMenu() *fyne.Menu {
	item := func(label, choice string) *fyne.MenuItem {
		it := fyne.NewMenuItem(label, nil)
		it.Checked = u.themeChoice() == choice
		it.Action = func() {
			u.SetTheme(choice)
			u.Win.SetMainMenu(u.menu())
		}
		return it
	}
	gauges := fyne.NewMenuItem("Engine panel", func() {
		u.SetGaugesShown(!u.gaugesShown())
		u.Win.SetMainMenu(u.menu())
	})
	gauges.Checked = u.gaugesShown()
	return fyne.NewMenu("View", item("Theme: as the system", themeSystem), item("Theme: light", themeLight),
		item("Theme: dark", themeDark), fyne.NewMenuItemSeparator(), gauges)
}

func (u *appUI) gaugesShown() bool { return !u.App.Preferences().Bool(kGauges) }

// SetGaugesShown shows or hides the Engine panel (the chat column takes
// its room) and keeps the choice.
func (u *appUI) SetGaugesShown(on bool) {
	u.App.Preferences().SetBool(kGauges, !on)
	if u.Chat != nil {
		u.Chat.showGauges(on)
	}
}

// helpMenu is Help: About, the README's desktop section, the data folder.
func (u *appUI) helpMenu() *fyne.Menu {
	return fyne.NewMenu("Help",
		fyne.NewMenuItem("About k3", u.showAbout),
	)
}

// aboutText is the About dialog's text.
func (u *appUI) aboutText() string {
	return "k3 " + Version + " runs Kimi K3 on this machine.\n\n" +
		"Conversations and the demo model are kept in\n" + u.B.DataDir + "\n\n" +
		"The guide is the section \"The desktop app\" of README.md, which comes with k3.\n\n" +
		"The app writes its messages (for a bug report) to the terminal it was started from: start it with `k3 2> k3.log` to keep them in a file."
}

// showAbout shows the version and where the app keeps its files.
func (u *appUI) showAbout() {
	folder := &url.URL{Scheme: "file", Path: filepath.ToSlash(u.B.DataDir)}
	body := container.NewVBox(wrapLabel(u.aboutText()),
		widget.NewHyperlink("Open the data folder", folder))
	d := dialog.NewCustom("About k3", "Close", body, u.Win)
	d.Resize(fyne.NewSize(480, 0))
	d.Show()
}
