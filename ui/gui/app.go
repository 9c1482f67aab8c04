// Package gui is k3's desktop app (Fyne): a setup wizard (machine check,
// checkpoint download or choice, trunk packing, memory plan) and a chat
// view with live engine gauges. Views are one file each (view_*.go); the
// chat view's parts are chat_*.go. The views reach the engine, the disk and
// the network only through k3/ui/bridge, which has no Fyne import: its
// interfaces (Backends, which tests fake), the chat engines, the event
// pump, background jobs and the settings; conversations are
// k3/engine/chat's Store and Message. Views use the types those
// interfaces return (engine events, engine/plan, storage/hub,
// storage/verify, doctor) and the words of tokenizer and storage/units.
package gui

import (
	"os"
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// appID is the app's unique id (also in FyneApp.toml).
const appID = "io.github.k3.desktop"

// dataDir is where the app keeps conversations and the demo model:
// $K3_DATA_DIR, else the user's config folder /k3.
func dataDir() string {
	if d := os.Getenv("K3_DATA_DIR"); d != "" {
		return d
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "k3")
	}
	return filepath.Join(os.TempDir(), "k3")
}

// newWindow creates the app's main window, whose first frame says the app
// is starting (N9: it was black for 1.5 s); once the app runs
// (Lifecycle().SetOnStarted) call fitScreen and the UI's Start, so the
// window knows its screen and background work begins on a live event loop.
func newWindow(a fyne.App, b bridge.Backends) (*appUI, fyne.Window) {
	w := a.NewWindow("k3 — Kimi K3 on this machine")
	u := newAppUI(a, w, b)
	w.SetContent(container.NewCenter(widget.NewLabel(startingText)))
	return u, w
}

// startingText is the first frame's words, before the UI starts.
const startingText = "Starting k3…"

// Open runs the desktop app until its window closes; it returns the exit code.
func Open() int {
	a := app.NewWithID(appID)
	a.SetIcon(iconResource)
	u, w := newWindow(a, bridge.RealBackends(dataDir()))
	a.Lifecycle().SetOnStarted(func() {
		fitScreen(w)
		u.Start()
	})
	w.SetCloseIntercept(u.Quit)
	w.ShowAndRun()
	return 0
}
