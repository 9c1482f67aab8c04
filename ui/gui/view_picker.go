package gui

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// modelChoice is one model the app knows: a model folder of this machine
// (with its trunk), the demo, or a server with its model.
type modelChoice struct {
	// Name says which model and where (with the draft model, the trunk and
	// the layers used); the box shows Short and Where, the model and where
	// it runs, Short shortened in the middle when the box is too narrow
	// (the list shows Name whole); Label is Name and the state, as the
	// list shows it
	Name, Short, Where, Label string
	Backend                   string
	Model                     *bridge.KnownModel  // the folder, for this machine's models
	Server                    *bridge.KnownServer // the server and its model, for a server
}

// modelChoices are the models the app knows: the model folder in use, the
// other folders used before (newest first), the demo when it was made and
// is not among them, then the servers: the settings' one, then the others
// used before (newest first). The names say the folder (with its parent
// when two folders share a name), the trunk and the draft model; for a
// server its model and host (its address when two hosts read the same).
// Label is Name until Refresh adds the state.
func modelChoices(s bridge.Settings, known []bridge.KnownModel, servers []bridge.KnownServer, demoDir string) []modelChoice {
	local := localModels(s, known, demoDir)
	remote := knownServers(s, servers)
	var out []modelChoice
	for i := range local {
		out = append(out, localChoice(s, local, i, demoDir))
	}
	for i := range remote {
		out = append(out, serverChoice(remote, i))
	}
	return out
}

// localModels are the model folders the app knows, each once: the one in
// use, the others used before, the demo when it was made; in a stable
// order (N6: entries moved under the mouse when the one in use went
// first): the demo first, then the folders by path.
func localModels(s bridge.Settings, known []bridge.KnownModel, demoDir string) []bridge.KnownModel {
	var local []bridge.KnownModel
	if k, ok := s.Known(); ok {
		local = append(local, k)
	}
	for _, k := range known {
		if !slices.ContainsFunc(local, func(o bridge.KnownModel) bool { return sameDir(o.Dir, k.Dir) }) {
			local = append(local, k)
		}
	}
	hasDemo := false
	for _, k := range local {
		hasDemo = hasDemo || k.Demo || sameDir(k.Dir, demoDir)
	}
	if !hasDemo && demoDir != "" {
		if _, err := os.Stat(filepath.Join(demoDir, "config.json")); err == nil {
			local = append(local, bridge.KnownModel{Dir: demoDir, Demo: true})
		}
	}
	slices.SortStableFunc(local, func(a, b bridge.KnownModel) int {
		ad, bd := sameDir(a.Dir, demoDir), sameDir(b.Dir, demoDir)
		switch {
		case ad && !bd:
			return -1
		case bd && !ad:
			return 1
		}
		return strings.Compare(filepath.Clean(a.Dir), filepath.Clean(b.Dir))
	})
	return local
}

// localChoice is the entry of local[i]: its folder (with its parent when
// another folder has its name), the demo, the draft model, the trunk and
// the layers.
func localChoice(s bridge.Settings, local []bridge.KnownModel, i int, demoDir string) modelChoice {
	k := local[i]
	name := filepath.Base(k.Dir)
	if slices.ContainsFunc(local, func(o bridge.KnownModel) bool { return o.Dir != k.Dir && filepath.Base(o.Dir) == name }) {
		name = filepath.Join(filepath.Base(filepath.Dir(k.Dir)), name)
	}
	switch {
	case sameDir(k.Dir, demoDir) || k.Demo && demoDir == "":
		name = "DEMO model"
	case k.Demo:
		// another demo folder (k3 demo DIR): named by its folder (N6:
		// two folders were both "DEMO model")
		name += " (a demo model)"
	}
	// the box leaves out the draft model: the Draft model box beside it
	// says so (at 1024 wide "… with draft model — on this …" was cut)
	short, where := name, " — on this machine"
	if bridge.DraftBeside(k.Dir) != "" && !s.NoDraft {
		name += " with draft model"
	}
	label := name + where
	if k.TrunkDir != "" {
		label += " (trunk " + filepath.Base(k.TrunkDir) + ")"
	}
	if k.Layers > 0 {
		label += fmt.Sprintf(", first %d layers", k.Layers)
	}
	return modelChoice{Name: label, Short: short, Where: where, Label: label, Backend: bridge.BackendLocal, Model: &local[i]}
}

// knownServers are the servers the app knows, each once: the settings'
// one, then the others used before. One server once (N6: "small" and "the
// server's model" at one address): an entry without a model name is
// dropped beside a named one at its address; then by address and model,
// a stable order.
func knownServers(s bridge.Settings, servers []bridge.KnownServer) []bridge.KnownServer {
	var remote []bridge.KnownServer
	if k, ok := s.KnownServer(); ok {
		remote = append(remote, k)
	}
	for _, k := range servers {
		if !slices.Contains(remote, k) {
			remote = append(remote, k)
		}
	}
	remote = slices.DeleteFunc(remote, func(k bridge.KnownServer) bool {
		return k.Model == "" && slices.ContainsFunc(remote, func(o bridge.KnownServer) bool { return o.URL == k.URL && o.Model != "" })
	})
	slices.SortStableFunc(remote, func(a, b bridge.KnownServer) int {
		if c := strings.Compare(a.URL, b.URL); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	return remote
}

// serverChoice is the entry of remote[i]: its model and host (its address
// when another address has the same host).
func serverChoice(remote []bridge.KnownServer, i int) modelChoice {
	k := remote[i]
	name := k.Model
	if name == "" {
		name = "the server's model"
	}
	host := serverHost(k)
	if slices.ContainsFunc(remote, func(o bridge.KnownServer) bool { return o.URL != k.URL && serverHost(o) == host }) {
		host = k.URL
	}
	where := " — on " + host
	label := name + where
	return modelChoice{Name: label, Short: name, Where: where, Label: label, Backend: bridge.BackendServer, Server: &remote[i]}
}

// serverHost is a server's host, or its address when it has none.
func serverHost(k bridge.KnownServer) string {
	if u, err := url.Parse(k.URL); err == nil && u.Host != "" {
		return u.Host
	}
	return k.URL
}

func sameDir(a, b string) bool { return a != "" && b != "" && filepath.Clean(a) == filepath.Clean(b) }

// inUse reports whether c is the model the settings run.
func (c modelChoice) inUse(s bridge.Settings) bool {
	if c.Server != nil {
		return s.Backend == bridge.BackendServer && c.Server.URL == s.ServerURL && c.Server.Model == s.ServerModel
	}
	return s.Backend != bridge.BackendServer && c.Model != nil && sameDir(c.Model.Dir, s.ModelDir)
}

// Each model's state in the picker: the model in use is loaded once the
// first message opened it; any other loads (or, on a server, is asked)
// with the next message. Nothing asks a server on the way (no probe when
// the picker opens).
const (
	stateLoaded   = "loaded"
	stateLoads    = "loads with the first message"
	stateAnswered = "in use"
	stateAsked    = "asked with the first message"
	stateDown     = "did not answer the last message"
)

// state is c's state; opened: the model in use is open (a message opened
// it, or it is served); down: the servers that did not answer (N6: a
// refused server still read "asked with the first message").
func (c modelChoice) state(s bridge.Settings, opened bool, down map[string]bool) string {
	open := opened && c.inUse(s)
	switch {
	case c.Server != nil && down[c.Server.URL]:
		return stateDown
	case c.Server != nil && open:
		return stateAnswered
	case c.Server != nil:
		return stateAsked
	case open:
		return stateLoaded
	}
	return stateLoads
}

// modelPicker is the chat header: which model answers and its state, every
// model the app knows with its state in the list, and a switch between them
// (no wizard).
type modelPicker struct {
	Root fyne.CanvasObject
	// Select lists the models, each with its state; it shows the name of
	// the one in use (its state is State, which a narrow window does not
	// cut off), shortened in the middle to fit (the list has it whole)
	Select *widget.Select
	// State is the state of the model in use, and that it is served
	State *widget.Label
	// Draft turns the draft model beside the model folder on and off
	// (shown when there is one)
	Draft *widget.Check
	// DraftNote says what the draft model does on this model and memory
	// plan (N1): not used where it would not be faster, its tokens per
	// pass where it drafts
	DraftNote *noteLabel
	v         *chatView
	shown     []modelChoice
	// inUse is the entry in use (the box fits its Short and Where);
	// fitted is the last fit: the name, the box's width, what it shows
	inUse  *modelChoice
	fitted struct {
		text, shown string
		w           float32
	}
}

func newModelPicker(v *chatView) *modelPicker {
	p := &modelPicker{v: v}
	p.Select = widget.NewSelect(nil, p.choose)
	p.State = widget.NewLabel("") // in the text colour: the low-importance grey was hard to read
	p.State.Truncation = fyne.TextTruncateEllipsis
	p.Draft = widget.NewCheck("Draft model", p.setDraft)
	p.Draft.Hide()
	p.DraftNote = newNoteLabel(true)
	p.DraftNote.Importance = widget.LowImportance
	more := widget.NewButton("Other models…", v.u.ShowWizard)
	more.Importance = widget.LowImportance
	row := container.NewBorder(nil, nil, widget.NewLabel("Model"), more, container.New(fitLayout{p}, p.Select))
	p.Root = container.NewVBox(row, container.NewBorder(nil, nil, p.Draft, nil, p.State), p.DraftNote)
	p.Refresh()
	return p
}

// Refresh shows the known models, each with its state.
func (p *modelPicker) Refresh() {
	s := p.v.u.S
	prefs := p.v.u.App.Preferences()
	p.shown = modelChoices(s, bridge.LoadKnownModels(prefs), bridge.LoadKnownServers(prefs), p.v.u.demoDir())
	srv, _ := p.v.engine.(bridge.Server)
	serving := ""
	if srv != nil {
		serving = srv.ServerURL()
	}
	opts := make([]string, len(p.shown))
	state := ""
	p.inUse = nil
	for i := range p.shown {
		c := &p.shown[i]
		st := c.state(s, p.v.Info != nil || serving != "", p.v.serverDown)
		c.Label = c.Name + " · " + st
		opts[i] = c.Label
		if c.inUse(s) {
			p.inUse, state = c, st
		}
	}
	if serving != "" {
		state += " · serving at " + serving
		if p.v.servedNote != "" {
			state += " · " + p.v.servedNote
		}
	}
	p.Select.Options = opts
	p.fit(p.Select.Size().Width) // the short name, fitted: the state is under it
	p.Select.Refresh()
	p.State.SetText(state)
	hasDraft := s.Backend != bridge.BackendServer && bridge.DraftBeside(s.ModelDir) != ""
	p.Draft.OnChanged = nil // setting the box is not the user's choice
	p.Draft.SetChecked(!s.NoDraft)
	p.Draft.OnChanged = p.setDraft
	if hasDraft {
		p.Draft.Show()
	} else {
		p.Draft.Hide()
	}
	p.DraftNote.SetText(p.draftNote(hasDraft))
}

// fitLayout gives the picker's box the row's width and fits the name it
// shows into it.
type fitLayout struct{ p *modelPicker }

func (l fitLayout) MinSize(objs []fyne.CanvasObject) fyne.Size { return objs[0].MinSize() }

func (l fitLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	objs[0].Move(fyne.NewPos(0, 0))
	objs[0].Resize(size)
	if l.p.fit(size.Width) {
		l.p.Select.Refresh()
	}
}

// fit puts the name of the model in use in the box, as much as a box of
// width w shows (0: not laid out yet, the whole name): the model's name is
// shortened in the middle ("Kimi-K3-Inst…w4a16 — on this machine"), not
// cut at the end where the box would cut it. It reports a change.
func (p *modelPicker) fit(w float32) bool {
	text := ""
	if c := p.inUse; c != nil {
		text = c.Short + c.Where
		switch {
		case w == p.fitted.w && text == p.fitted.text:
			text = p.fitted.shown // the same name in the same width
		case w > 0:
			p.fitted.text, p.fitted.w = text, w
			th := p.Select.Theme()
			room := w - th.Size(theme.SizeNameInlineIcon) - th.Size(theme.SizeNameInnerPadding) - 3*th.Size(theme.SizeNamePadding)
			size := th.Size(theme.SizeNameText)
			text = fitMiddle(c.Short, c.Where, room, func(s string) float32 { return fyne.MeasureText(s, size, fyne.TextStyle{}).Width })
			p.fitted.shown = text
		}
	}
	if text == p.Select.Selected {
		return false
	}
	p.Select.Selected = text
	return true
}

// fitMiddle is name+where in at most room wide (measure: a text's width):
// whole when it fits; else name shortened in the middle with "…" beside
// where while at least minKept of its letters stay; else the name alone,
// shortened as it must be (the name says more than where it runs: the
// list below names both whole).
func fitMiddle(name, where string, room float32, measure func(string) float32) string {
	if measure(name+where) <= room {
		return name + where
	}
	if where != "" {
		if s, ok := shortenMiddle(name, where, room, minKept, measure); ok {
			return s
		}
		return fitMiddle(name, "", room, measure)
	}
	if s, ok := shortenMiddle(name, "", room, 2, measure); ok {
		return s
	}
	return string([]rune(name)[:1]) + "…"
}

// minKept is the fewest letters of a shortened name shown beside where it
// runs: fewer read as a riddle ("moo…05 — on gpu-box:8000").
const minKept = 24

// shortenMiddle keeps as many of name's letters as fit (at least least),
// the first half and the last, with "…" between, followed by where.
func shortenMiddle(name, where string, room float32, least int, measure func(string) float32) (string, bool) {
	r := []rune(name)
	for keep := len(r) - 1; keep >= least; keep-- {
		head := (keep + 1) / 2
		s := string(r[:head]) + "…" + string(r[len(r)-(keep-head):]) + where
		if measure(s) <= room {
			return s, true
		}
	}
	return "", false
}

// draftNote is what the draft model does, for the line under the box:
// before the model is loaded, what it is for; once loaded, whether this
// model and plan let it make replies faster; while it drafts, its tokens
// per pass.
func (p *modelPicker) draftNote(hasDraft bool) string {
	v := p.v
	switch {
	case !hasDraft:
		return ""
	case v.u.S.NoDraft:
		return "Draft model " + bridge.DraftOff
	case v.Info == nil || v.Info.Draft == "":
		return "Draft model: faster replies on a model read from disk, the same answer; it loads with the model"
	}
	note := "Draft model " + v.Info.Draft
	if tp := v.Gauges.G.TokensPerPass(); tp > 0 {
		note = fmt.Sprintf("Draft model in use: %.2f tokens per pass in the last reply (same answer)", tp)
	}
	return note
}

// choose switches to the model labelled label: the chat goes on with the
// same conversation on the other engine (opened with the next message). A
// server's own API key comes from the key store.
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
		switch {
		case c.Model != nil:
			u.S.Use(*c.Model)
		case c.Server != nil:
			key, err := bridge.LoadServerKey(u.App.Preferences(), u.B.KeyStore(), c.Server.URL)
			if err != nil {
				v.Notice.SetText("The server's API key could not be read: " + bridge.Explain(err))
			}
			u.S.UseServer(*c.Server, key)
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
	if d, ok := v.engine.(bridge.DraftSwitch); ok {
		// the model stays loaded: the next turn drafts or not (N1)
		d.SetDraft(on)
		if err := u.SaveSettings(); err != nil {
			v.Notice.SetText(bridge.Explain(err))
		}
	} else {
		p.apply()
	}
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
