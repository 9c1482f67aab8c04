package gui

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// modelChoice is one model the app knows: a model folder of this machine
// (with its trunk), the demo, or the server.
type modelChoice struct {
	Label   string
	Backend string
	Model   *bridge.KnownModel // the folder, for this machine's models
}

// modelChoices are the models the app knows: the model folder in use, the
// other folders used before (newest first), the demo when it was made and
// is not among them, then the server. The labels name the folder (with its
// parent when two folders share a name), the trunk and the draft model.
func modelChoices(s bridge.Settings, known []bridge.KnownModel, demoDir string) []modelChoice {
	var local []bridge.KnownModel
	if k, ok := s.Known(); ok {
		local = append(local, k)
	}
	hasDemo := false
	for _, k := range known {
		if !slices.ContainsFunc(local, func(o bridge.KnownModel) bool { return sameDir(o.Dir, k.Dir) }) {
			local = append(local, k)
		}
	}
	for _, k := range local {
		hasDemo = hasDemo || k.Demo || sameDir(k.Dir, demoDir)
	}
	if !hasDemo && demoDir != "" {
		if _, err := os.Stat(filepath.Join(demoDir, "config.json")); err == nil {
			local = append(local, bridge.KnownModel{Dir: demoDir, Demo: true})
		}
	}
	var out []modelChoice
	for i, k := range local {
		name := filepath.Base(k.Dir)
		if slices.ContainsFunc(local, func(o bridge.KnownModel) bool { return o.Dir != k.Dir && filepath.Base(o.Dir) == name }) {
			name = filepath.Join(filepath.Base(filepath.Dir(k.Dir)), name)
		}
		if k.Demo {
			name = "DEMO model"
		}
		if bridge.DraftBeside(k.Dir) != "" && !s.NoDraft {
			name += " with draft model"
		}
		label := name + " — on this machine"
		if k.TrunkDir != "" {
			label += " (trunk " + filepath.Base(k.TrunkDir) + ")"
		}
		if k.Layers > 0 {
			label += fmt.Sprintf(", first %d layers", k.Layers)
		}
		out = append(out, modelChoice{Label: label, Backend: bridge.BackendLocal, Model: &local[i]})
	}
	if s.ServerURL != "" {
		host := s.ServerURL
		if u, err := url.Parse(s.ServerURL); err == nil && u.Host != "" {
			host = u.Host
		}
		name := s.ServerModel
		if name == "" {
			name = "the server's model"
		}
		out = append(out, modelChoice{Label: name + " — on " + host, Backend: bridge.BackendServer})
	}
	return out
}

func sameDir(a, b string) bool { return a != "" && b != "" && filepath.Clean(a) == filepath.Clean(b) }

// inUse reports whether c is the model the settings run.
func (c modelChoice) inUse(s bridge.Settings) bool {
	if c.Backend == bridge.BackendServer {
		return s.Backend == bridge.BackendServer
	}
	return s.Backend != bridge.BackendServer && c.Model != nil && sameDir(c.Model.Dir, s.ModelDir)
}

// modelPicker is the chat header: which model answers, whether it is
// loaded, and a switch between the models the app knows (no wizard).
type modelPicker struct {
	Root   fyne.CanvasObject
	Select *widget.Select
	State  *widget.Label
	// Draft turns the draft model beside the model folder on and off
	// (shown when there is one)
	Draft *widget.Check
	v     *chatView
	shown []modelChoice
}

func newModelPicker(v *chatView) *modelPicker {
	p := &modelPicker{v: v}
	p.Select = widget.NewSelect(nil, p.choose)
	p.State = widget.NewLabel("")
	p.State.Importance = widget.LowImportance
	p.Draft = widget.NewCheck("Draft model: faster replies, same answer", p.setDraft)
	p.Draft.Hide()
	more := widget.NewButton("Other models…", v.u.ShowWizard)
	more.Importance = widget.LowImportance
	row := container.NewBorder(nil, nil, widget.NewLabel("Model"), container.NewHBox(p.State, more), p.Select)
	p.Root = container.NewVBox(row, p.Draft)
	p.Refresh()
	return p
}

// Refresh shows the known models and the state of the one in use.
func (p *modelPicker) Refresh() {
	s := p.v.u.S
	p.shown = modelChoices(s, bridge.LoadKnownModels(p.v.u.App.Preferences()), p.v.u.demoDir())
	opts := make([]string, len(p.shown))
	sel := ""
	for i, c := range p.shown {
		opts[i] = c.Label
		if c.inUse(s) {
			sel = c.Label
		}
	}
	p.Select.Options = opts
	p.Select.Selected = sel
	p.Select.Refresh()
	hasDraft := s.Backend != bridge.BackendServer && bridge.DraftBeside(s.ModelDir) != ""
	p.Draft.OnChanged = nil // setting the box is not the user's choice
	p.Draft.SetChecked(!s.NoDraft)
	p.Draft.OnChanged = p.setDraft
	if hasDraft {
		p.Draft.Show()
	} else {
		p.Draft.Hide()
	}
	srv, _ := p.v.engine.(bridge.Server)
	switch {
	case srv != nil && srv.ServerURL() != "":
		p.State.SetText("loaded · serving at " + srv.ServerURL())
	case p.v.Info != nil && p.v.Info.Remote:
		p.State.SetText("answers from the server")
	case p.v.Info != nil:
		p.State.SetText("loaded")
	case s.Backend == bridge.BackendServer:
		p.State.SetText("asked with the first message")
	default:
		p.State.SetText("loads with the first message")
	}
}

// choose switches to the model labelled label: the chat goes on with the
// same conversation on the other engine (opened with the next message).
func (p *modelPicker) choose(label string) {
	v, u := p.v, p.v.u
	for _, c := range p.shown {
		if c.Label != label || c.inUse(u.S) {
			continue
		}
		if v.Busy {
			v.Notice.SetText("A reply is being written: wait for it (or press Stop), then switch the model.")
			break
		}
		if c.Model != nil {
			u.S.Use(*c.Model)
		} else {
			u.S.Backend = c.Backend
		}
		p.apply()
		break
	}
	p.Refresh()
}

// setDraft turns the draft model on or off for the next message.
func (p *modelPicker) setDraft(on bool) {
	v, u := p.v, p.v.u
	if on == !u.S.NoDraft {
		return
	}
	if v.Busy {
		v.Notice.SetText("A reply is being written: wait for it (or press Stop), then turn the draft model on or off.")
		p.Refresh()
		return
	}
	u.S.NoDraft = !on
	p.apply()
	p.Refresh()
}

// apply saves the settings and lets the next message open the model they
// name now.
func (p *modelPicker) apply() {
	if err := p.v.u.SaveSettings(); err != nil {
		p.v.Notice.SetText(bridge.Explain(err))
	}
	p.v.ResetEngine()
}
