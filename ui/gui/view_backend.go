package gui

import (
	"context"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// Choice labels of where the model runs.
const (
	choiceLocal  = "Run the model on this machine"
	choiceServer = "Use a server"
)

// BackendForm edits where the model runs: here, or on an OpenAI-compatible
// server (another k3 serve, vLLM or SGLang) with its address, key and model.
type BackendForm struct {
	Where *widget.RadioGroup
	// Folder is the model folder on this machine (G20: it can be changed
	// here, without the wizard); Choose opens a folder dialog when set.
	Folder    *widget.Entry
	ChooseBt  *widget.Button
	Choose    func()
	FolderMsg *widget.Label
	// Known are the model folders used before (a folder chosen again
	// keeps its trunk); DemoDir is where the demo model lives.
	Known   []bridge.KnownModel
	DemoDir string
	// Note is what the chat should say after Apply (a folder without a
	// packed trunk)
	Note   string
	URL    *widget.Entry
	Key    *widget.Entry
	Model  *widget.Select
	Find   *widget.Button
	Status *widget.Label
	Items  []*widget.FormItem
	// B asks the server for its models (Backends.ServerModels)
	B bridge.Backends

	do func(func())
}

// NewBackendForm fills the form from s; do runs UI updates from the model
// lookup's goroutine (fyne.Do).
func NewBackendForm(s bridge.Settings, do func(func())) *BackendForm {
	f := &BackendForm{do: do}
	f.Folder = widget.NewEntry()
	f.Folder.SetPlaceHolder("the folder with config.json and the .safetensors files")
	f.Folder.SetText(s.ModelDir)
	f.ChooseBt = widget.NewButton("Choose…", func() {
		if f.Choose != nil {
			f.Choose()
		}
	})
	f.FolderMsg = widget.NewLabel("")
	f.FolderMsg.Wrapping = fyne.TextWrapWord
	f.URL = widget.NewEntry()
	f.URL.SetPlaceHolder("http://127.0.0.1:8080/v1")
	f.URL.SetText(s.ServerURL)
	f.Key = widget.NewPasswordEntry()
	f.Key.SetPlaceHolder("none")
	f.Key.SetText(s.ServerKey)
	f.Model = widget.NewSelect(nil, nil)
	f.Model.PlaceHolder = "the server's first model"
	if s.ServerModel != "" {
		f.Model.Options = []string{s.ServerModel}
		f.Model.SetSelected(s.ServerModel)
	}
	f.Status = widget.NewLabel("")
	f.Status.Wrapping = fyne.TextWrapWord
	f.Find = widget.NewButton("Ask the server for its models", f.findModels)
	f.Where = widget.NewRadioGroup([]string{choiceLocal, choiceServer}, func(c string) { f.enable(c == choiceServer) })
	if s.Backend == bridge.BackendServer {
		f.Where.SetSelected(choiceServer)
	} else {
		f.Where.SetSelected(choiceLocal)
	}
	f.Items = []*widget.FormItem{
		widget.NewFormItem("Where the model runs", f.Where),
		widget.NewFormItem("Model folder", container.NewBorder(nil, nil, nil, f.ChooseBt, f.Folder)),
		widget.NewFormItem("", f.FolderMsg),
		// the fields in a container: a form greys the label of a disabled
		// field and keeps it grey once the field is enabled (G25), so the
		// labels stay in the text colour and the fields show their state
		widget.NewFormItem("Server address", container.NewStack(f.URL)),
		widget.NewFormItem("API key", container.NewStack(f.Key)),
		widget.NewFormItem("Model", container.NewStack(f.Model)),
		widget.NewFormItem("", f.Find),
		widget.NewFormItem("", f.Status),
	}
	f.enable(s.Backend == bridge.BackendServer)
	return f
}

func (f *BackendForm) enable(server bool) {
	for _, w := range []fyne.Disableable{f.URL, f.Key, f.Model, f.Find} {
		if server {
			w.Enable()
		} else {
			w.Disable()
		}
	}
	for _, w := range []fyne.Disableable{f.Folder, f.ChooseBt} {
		if server {
			w.Disable()
		} else {
			w.Enable()
		}
	}
}

// findModels fills the model list from the server's /v1/models.
func (f *BackendForm) findModels() {
	base, err := bridge.ServerBaseURL(f.URL.Text)
	if err != nil {
		f.Status.SetText(err.Error())
		return
	}
	f.Status.SetText("asking " + base + " …")
	f.Find.Disable()
	key := f.Key.Text
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		ids, err := f.B.ServerModels(ctx, base, key)
		f.do(func() {
			f.Find.Enable()
			if err != nil {
				logDetails("asking "+base+" for its models", err)
				f.Status.SetText(bridge.ExplainServerHere(base, err))
				return
			}
			f.Model.Options = ids
			if len(ids) > 0 && !slices.Contains(ids, f.Model.Selected) {
				f.Model.SetSelected(ids[0])
			}
			f.Model.Refresh()
			f.Status.SetText("the server serves " + strings.Join(ids, ", "))
		})
	}()
}

// Apply copies the form into s, or explains what is wrong.
func (f *BackendForm) Apply(s *bridge.Settings) error {
	if f.Where.Selected != choiceServer {
		return f.applyFolder(s)
	}
	return s.SetServer(f.URL.Text, f.Key.Text, f.Model.Selected)
}

// showBackendSettings opens the "where the model runs" dialog; a change
// takes effect at once (the chat reopens on the chosen engine).
func (u *appUI) showBackendSettings() {
	f := NewBackendForm(u.S, u.do)
	f.B = u.B
	f.Known, f.DemoDir = bridge.LoadKnownModels(u.App.Preferences()), u.demoDir()
	f.Choose = func() {
		dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
			if err == nil && l != nil {
				f.Folder.SetText(l.Path())
			}
		}, u.Win)
	}
	d := dialog.NewForm("Where the model runs", "Save", "Cancel", f.Items, func(ok bool) {
		if !ok {
			return
		}
		before := u.S
		if err := f.Apply(&u.S); err != nil {
			dialog.ShowInformation("Not saved", err.Error(), u.Win)
			return
		}
		if err := u.SaveSettings(); err != nil {
			dialog.ShowInformation("The API key was not saved", bridge.Explain(err), u.Win)
		}
		changed := before.Backend != u.S.Backend || before.ServerURL != u.S.ServerURL ||
			before.ServerKey != u.S.ServerKey || before.ServerModel != u.S.ServerModel ||
			before.Setup() != u.S.Setup()
		if changed && u.Chat != nil {
			u.Chat.Shutdown()
			u.Chat = nil
		}
		if u.S.CanChat() {
			u.ShowChat()
			if f.Note != "" {
				u.Chat.Notice.SetText(f.Note)
			}
		}
	}, u.Win)
	d.Resize(fyne.NewSize(640, 460))
	d.Show()
}
