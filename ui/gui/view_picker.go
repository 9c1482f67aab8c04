package gui

import (
	"net/url"
	"path/filepath"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// modelChoice is one model the app knows: the model folder of this machine
// (with its trunk) or the demo, or the server.
type modelChoice struct {
	Label   string
	Backend string
}

// modelChoices are the models the settings know, the one in use first
// among equals (the order is fixed: this machine, then the server).
func modelChoices(s bridge.Settings) []modelChoice {
	var out []modelChoice
	if s.ModelDir != "" {
		name := filepath.Base(s.ModelDir)
		if s.Demo {
			name = "DEMO model"
		}
		if bridge.DraftBeside(s.ModelDir) != "" {
			name += " with draft model"
		}
		label := name + " — on this machine"
		if s.TrunkDir != "" {
			label += " (trunk " + filepath.Base(s.TrunkDir) + ")"
		}
		out = append(out, modelChoice{Label: label, Backend: bridge.BackendLocal})
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

// modelPicker is the chat header: which model answers, whether it is
// loaded, and a switch between the models the app knows (no wizard).
type modelPicker struct {
	Root   fyne.CanvasObject
	Select *widget.Select
	State  *widget.Label
	v      *chatView
	shown  []modelChoice
}

func newModelPicker(v *chatView) *modelPicker {
	p := &modelPicker{v: v}
	p.Select = widget.NewSelect(nil, p.choose)
	p.State = widget.NewLabel("")
	p.State.Importance = widget.LowImportance
	more := widget.NewButton("Other models…", v.u.ShowWizard)
	more.Importance = widget.LowImportance
	p.Root = container.NewBorder(nil, nil, widget.NewLabel("Model"), container.NewHBox(p.State, more), p.Select)
	p.Refresh()
	return p
}

// Refresh shows the known models and the state of the one in use.
func (p *modelPicker) Refresh() {
	s := p.v.u.S
	p.shown = modelChoices(s)
	opts := make([]string, len(p.shown))
	sel := ""
	for i, c := range p.shown {
		opts[i] = c.Label
		if c.Backend == s.Backend {
			sel = c.Label
		}
	}
	p.Select.Options = opts
	p.Select.Selected = sel
	p.Select.Refresh()
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
// same conversation on the other engine.
func (p *modelPicker) choose(label string) {
	v, u := p.v, p.v.u
	for _, c := range p.shown {
		if c.Label != label || c.Backend == u.S.Backend {
			continue
		}
		if v.Busy {
			v.Notice.SetText("A reply is being written: wait for it (or press Stop), then switch the model.")
			p.Refresh()
			return
		}
		u.S.Backend = c.Backend
		if err := u.SaveSettings(); err != nil {
			v.Notice.SetText(bridge.Explain(err))
		}
		v.ResetEngine()
	}
	p.Refresh()
}
