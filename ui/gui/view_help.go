package gui

import (
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

// SetTheme applies a theme choice and keeps it.
func (u *appUI) SetTheme(choice string) {
	switch choice {
	case themeLight:
		u.App.Settings().SetTheme(appTheme{theme.DefaultTheme(), true, theme.VariantLight})
	case themeDark:
		u.App.Settings().SetTheme(appTheme{theme.DefaultTheme(), true, theme.VariantDark})
	default:
		choice = themeSystem
		u.App.Settings().SetTheme(appTheme{Theme: theme.DefaultTheme()})
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
		fyne.NewMenuItem("Guide", u.showGuide),
		fyne.NewMenuItem("Keys", u.showKeys),
		fyne.NewMenuItemSeparator(),
		fyne.NewMenuItem("About k3", u.showAbout),
	)
}

// guideText is Help → Guide (N10: Help had only About): what each step and
// the chat do, and where the files are.
func (u *appUI) guideText() string {
	return "Setting up (k3 → Setup…)\n" +
		"1 This machine: k3 measures the memory, the processor and each disk, and chooses a memory preset.\n" +
		"2 The model: choose the folder with Kimi K3's files, download them into it, or use the small DEMO model to try the app. " +
		"Verify checks that every file is whole.\n" +
		"3 Pack the shared weights: writes the part of every layer that every word goes through as one file on a fast disk, " +
		"so the model runs in less memory. You can stop and continue later.\n" +
		"4 Memory: how much memory the model may use. More memory is faster; the answers are the same at every setting.\n" +
		"5 Done: a summary. Open the chat.\n\n" +
		"The chat\n" +
		"Type a message and press Enter (Shift+Enter for a new line). The line under the message says what a reply will cost " +
		"on a slow machine; the status line says what the model is doing while it works. Stop keeps what was written. " +
		"The Engine panel at the right shows memory, disk reads and speed (View → Engine panel hides it). " +
		"Choose another model or a server at the top of the chat; Serve over HTTP… lets other programs use the model.\n\n" +
		"Where the files are\n" +
		"Conversations: " + u.conversationsDir() + "\n" +
		"The demo model: " + u.demoDir() + "\n" +
		"Settings and the rest: " + u.B.DataDir
}

// keysText is Help → Keys.
const keysText = "Enter: send the message\n" +
	"Shift+Enter: a new line in the message\n" +
	"Esc: stop the reply (or close the dialog on top; in the search, clear it)\n" +
	"Ctrl+N: a new conversation\n" +
	"Ctrl+F: search the conversations\n" +
	"Tab, Shift+Tab: the next or the previous field or button"

func (u *appUI) showGuide() { u.showText("Guide", u.guideText(), 640) }

func (u *appUI) showKeys() { u.showText("Keys", keysText, 480) }

// showText shows a text in a dialog that scrolls, within the window.
func (u *appUI) showText(title, text string, width float32) {
	size := u.Win.Canvas().Size()
	d := dialog.NewCustom(title, "Close", container.NewVScroll(wrapLabel(text)), u.Win)
	d.Resize(fyne.NewSize(min(width, size.Width-40), min(520, size.Height-40)))
	d.Show()
}

// aboutText is the About dialog's text.
func (u *appUI) aboutText() string {
	return "k3 " + Version + " runs Kimi K3 on this machine.\n\n" +
		"Conversations and the demo model are kept in\n" + u.B.DataDir + "\n\n" +
		"Help → Guide says what each step does; the whole guide is the section \"The desktop app\" of README.md, which comes with k3.\n\n" +
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
