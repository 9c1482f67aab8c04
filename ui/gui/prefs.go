package gui

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/data/binding"

	"k3/ui/bridge"
)

// appNotes are what the app notes as it goes, each bound to its own
// preference key (binding.BindPreference*): setting one writes that key
// alone, at once, and a widget made with it shows and edits the
// preference itself. The settings the user edits behind Save or Done stay
// in bridge.Settings.
type appNotes struct {
	WizardDone       binding.Bool   // the wizard finished once: start in the chat
	LastConversation binding.String // the conversation open
	ServeAddr        binding.String // the serve panel's address field
	// a download that did not finish: the model step offers to resume it
	DownloadDest, DownloadRevision binding.String
	DownloadLayers                 binding.Int
}

func bindNotes(p fyne.Preferences) appNotes {
	return appNotes{
		WizardDone:       binding.BindPreferenceBool(bridge.KeyWizardDone, p),
		LastConversation: binding.BindPreferenceString(bridge.KeyLastConversation, p),
		ServeAddr:        binding.BindPreferenceString(bridge.KeyServeAddr, p),
		DownloadDest:     binding.BindPreferenceString(bridge.KeyDownloadDest, p),
		DownloadRevision: binding.BindPreferenceString(bridge.KeyDownloadRevision, p),
		DownloadLayers:   binding.BindPreferenceInt(bridge.KeyDownloadLayers, p),
	}
}

// pending is the download that did not finish ("" for none).
func (n appNotes) pending() (dest, revision string, layers int) {
	dest, _ = n.DownloadDest.Get()
	revision, _ = n.DownloadRevision.Get()
	layers, _ = n.DownloadLayers.Get()
	return dest, revision, layers
}

// setPending notes a download under way (dest "" when none is).
func (n appNotes) setPending(dest, revision string, layers int) {
	n.DownloadDest.Set(dest)
	n.DownloadRevision.Set(revision)
	n.DownloadLayers.Set(layers)
}

func (n appNotes) wizardDone() bool { b, _ := n.WizardDone.Get(); return b }

func (n appNotes) lastConversation() string { s, _ := n.LastConversation.Get(); return s }
