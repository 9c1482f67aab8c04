package gui

import (
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
)

// UI is the app: one window showing either the setup wizard or the chat.
type UI struct {
	App fyne.App
	Win fyne.Window
	B   Backends
	S   Settings

	// do runs a function on the Fyne goroutine (fyne.Do; tests may swap it).
	do func(func())

	Wizard *Wizard
	Chat   *ChatView
}

// NewUI builds the views. Call Start to show the first one.
func NewUI(a fyne.App, w fyne.Window, b Backends) *UI {
	u := &UI{App: a, Win: w, B: b, S: LoadSettings(a.Preferences()), do: fyne.Do}
	return u
}

// Start shows the chat when the wizard was completed before, else the wizard.
func (u *UI) Start() {
	u.Win.SetMainMenu(u.menu())
	if u.S.CanChat() && (u.S.WizardDone || u.S.Backend == BackendServer) {
		u.ShowChat()
	} else {
		u.ShowWizard()
	}
}

func (u *UI) menu() *fyne.MainMenu {
	return fyne.NewMainMenu(
		fyne.NewMenu("k3",
			fyne.NewMenuItem("Setup wizard…", u.ShowWizard),
			fyne.NewMenuItem("Chat", func() {
				if u.S.CanChat() {
					u.ShowChat()
				}
			}),
			fyne.NewMenuItem("Model location…", u.showBackendSettings),
			fyne.NewMenuItem("Serve over HTTP…", u.showServeDialog),
		),
		fyne.NewMenu("Conversation",
			fyne.NewMenuItem("New", func() {
				if u.Chat != nil {
					u.Chat.NewConversation()
				}
			}),
		),
	)
}

// SaveSettings persists the settings.
func (u *UI) SaveSettings() { u.S.Save(u.App.Preferences()) }

// ShowWizard shows the setup wizard from its first step.
func (u *UI) ShowWizard() {
	if u.Chat != nil {
		u.Chat.Shutdown()
		u.Chat = nil
	}
	u.Wizard = NewWizard(u)
	u.Win.SetContent(u.Wizard.Root)
	u.Wizard.Go(0)
}

// ShowChat shows the chat view.
func (u *UI) ShowChat() {
	if u.Wizard != nil {
		u.Wizard.Cancel()
		u.Wizard = nil
	}
	if u.Chat == nil {
		u.Chat = NewChatView(u)
	}
	u.Win.SetContent(u.Chat.Root)
	u.Chat.Focus()
}

// ShowError shows an error in plain words.
func (u *UI) ShowError(title string, err error) {
	dialog.ShowInformation(title, Explain(err), u.Win)
}

// conversationsDir is where history files live.
func (u *UI) conversationsDir() string { return filepath.Join(u.B.DataDir, "conversations") }

// demoDir is where the demo model is written.
func (u *UI) demoDir() string { return filepath.Join(u.B.DataDir, "demo-model") }
