package gui

import (
	"context"
	"errors"
	"log"
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"

	"k3/doctor"
	"k3/ui/bridge"
)

// appUI is the app: one window showing either the setup wizard or the chat.
type appUI struct {
	App fyne.App
	Win fyne.Window
	B   bridge.Backends
	S   bridge.Settings
	N   appNotes // what the app notes as it goes, bound to the preferences

	// do runs a function on the Fyne goroutine (fyne.Do; tests may swap it).
	do func(func())
	// later runs a function on the Fyne goroutine after a while
	// (fyneLater; tests swap in a clock of their own).
	later laterFunc

	wizard *wizard
	Chat   *chatView
	// machine is the last measurement of this machine (nil: none yet);
	// machines keeps it with its time and the disks it measured, also for
	// the next start: a wizard opened again ("Other models…") shows it
	// instead of measuring again (issue 27, G20)
	machine  *doctor.Report
	machines *bridge.MachineMemo
}

// newAppUI builds the views. Call Start to show the first one.
func newAppUI(a fyne.App, w fyne.Window, b bridge.Backends) *appUI {
	u := &appUI{App: a, Win: w, B: b, S: bridge.LoadSettings(a.Preferences()), N: bindNotes(a.Preferences()), do: fyne.Do, later: fyneLater}
	u.machines = bridge.NewMachineMemo(b.DataDir)
	u.machine, _ = u.machines.Last()
	u.SetTheme(u.themeChoice()) // the system's variant too has a focus that shows (G8)
	key, err := bridge.LoadServerKey(a.Preferences(), b.KeyStore(), u.S.ServerURL)
	u.S.ServerKey = key
	if err != nil {
		fyne.LogError("the server's API key", err)
	}
	return u
}

// Start shows the chat when the wizard was completed before, else the wizard.
func (u *appUI) Start() {
	u.Win.SetMainMenu(u.menu())
	if u.S.CanChat() && (u.N.wizardDone() || u.S.Backend == bridge.BackendServer) {
		u.ShowChat()
	} else {
		u.ShowWizard()
	}
}

func (u *appUI) menu() *fyne.MainMenu {
	return fyne.NewMainMenu(
		fyne.NewMenu("k3",
			fyne.NewMenuItem("Setup wizard…", u.ShowWizard),
			fyne.NewMenuItem("Chat", func() {
				switch {
				case u.wizard != nil && u.Win.Content() == u.wizard.Root:
					if u.N.wizardDone() && u.S.ModelDir != "" || u.wizard.Changes() {
						u.wizard.BackToChat()
					}
				case u.S.CanChat():
					u.ShowChat()
				}
			}),
			fyne.NewMenuItem("Model location…", u.showBackendSettings),
			fyne.NewMenuItem("Serve over HTTP…", u.showServeDialog),
			quitItem(u.Quit),
		),
		fyne.NewMenu("Conversation",
			fyne.NewMenuItem("New", func() {
				if u.Chat != nil {
					u.Chat.NewConversation()
				}
			}),
			fyne.NewMenuItem("Settings…", func() {
				if u.Chat != nil {
					u.Chat.showChatSettings()
				}
			}),
			fyne.NewMenuItem("Export as Markdown…", func() {
				if u.Chat != nil {
					u.Chat.Export()
				}
			}),
		),
		u.viewMenu(),
		u.helpMenu(),
	)
}

func quitItem(quit func()) *fyne.MenuItem {
	q := fyne.NewMenuItem("Quit", quit)
	q.IsQuit = true
	return q
}

// Quit closes the app; a reply being written is saved first, marked
// stopped, as Stop keeps it.
func (u *appUI) Quit() {
	if u.Chat != nil {
		u.Chat.SavePartial()
		u.Chat.Shutdown()
	}
	u.App.Quit()
}

// SaveSettings persists the settings; the server's API key goes to the key
// store (the system keychain, or a file only the user can read), never to
// the preferences. The model folder and the server are remembered for the
// model picker; the key of a server it no longer remembers is removed.
func (u *appUI) SaveSettings() error {
	p, ks := u.App.Preferences(), u.B.KeyStore()
	u.S.Save(p)
	bridge.RememberModel(p, u.S)
	var err error
	for _, url := range bridge.RememberServer(p, u.S) {
		if url != u.S.ServerURL {
			err = errors.Join(err, ks.Delete(bridge.ServerKeyFor(url)))
		}
	}
	if u.S.ServerURL == "" {
		return err
	}
	return errors.Join(err, bridge.SaveServerKey(ks, u.S.ServerURL, u.S.ServerKey))
}

// ShowWizard shows the setup wizard from its first step. The chat (and a
// reply it is writing) goes on behind it, on the model in use.
func (u *appUI) ShowWizard() {
	if u.wizard != nil {
		u.wizard.Cancel()
	}
	u.wizard = newWizard(u)
	u.Win.SetContent(u.wizard.Root)
	u.wizard.Go(0)
}

// ShowChat shows the chat view.
func (u *appUI) ShowChat() {
	if u.wizard != nil {
		u.wizard.Cancel()
		u.wizard = nil
	}
	if u.Chat == nil {
		u.Chat = newChatView(u)
	}
	u.Win.SetContent(u.Chat.Root)
	u.Chat.Focus()
}

// ShowError shows an error in plain words.
func (u *appUI) ShowError(title string, err error) {
	dialog.ShowInformation(title, bridge.Explain(err), u.Win)
}

// conversationsDir is where history files live.
func (u *appUI) conversationsDir() string { return filepath.Join(u.B.DataDir, "conversations") }

// demoDir is where the demo model is written.
func (u *appUI) demoDir() string { return filepath.Join(u.B.DataDir, "demo-model") }

// logDetails writes an error's technical details (the chain the window's
// plain words leave out: "dial tcp …", system error text) to the log, for
// whoever looks into a problem; nil and a stop are not logged.
func logDetails(what string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("k3: %s: %v", what, err)
	}
}
