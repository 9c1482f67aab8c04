package gui

import (
	"fmt"
	"math"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/engine/plan"
	"k3/storage/units"
)

// MemoryStep is wizard step 4: a preset and two budgets, with the memory
// plan recomputed live and impossible settings refused before anything is
// loaded.
type MemoryStep struct {
	w    *Wizard
	view fyne.CanvasObject

	Preset   *widget.Select
	Trunk    *widget.Slider
	Cache    *widget.Slider
	TrunkLbl *widget.Label
	CacheLbl *widget.Label
	Note     *widget.Label
	PlanText *widget.Label
	Verdict  *widget.Label

	mem     *plan.Memory
	Plan    *plan.Plan
	PlanErr error
	busy    bool
	dirty   bool
	setting bool // sliders moved by a preset, not the user
}

func newMemoryStep(w *Wizard) *MemoryStep {
	s := &MemoryStep{w: w}
	s.Preset = widget.NewSelect(plan.Names(), s.presetChosen)
	s.Trunk = widget.NewSlider(0, 128)
	s.Trunk.Step = 0.5
	s.Cache = widget.NewSlider(0, 128)
	s.Cache.Step = 0.5
	s.TrunkLbl = widget.NewLabel("")
	s.CacheLbl = widget.NewLabel("")
	s.Trunk.OnChanged = func(float64) { s.slid() }
	s.Cache.OnChanged = func(float64) { s.slid() }
	s.Note = wrapLabel("")
	s.PlanText = widget.NewLabel("")
	s.PlanText.TextStyle = fyne.TextStyle{Monospace: true}
	s.Verdict = wrapLabel("")
	s.Verdict.TextStyle = fyne.TextStyle{Bold: true}
	intro := wrapLabel("Memory decides speed: every GB given to the trunk saves reading it from disk for every token; " +
		"the expert cache keeps recently used experts. The plan below adds up everything before anything is loaded.")
	form := widget.NewForm(
		widget.NewFormItem("Preset", s.Preset),
		widget.NewFormItem("Trunk (pinned layers + ring)", container.NewBorder(nil, nil, nil, s.TrunkLbl, s.Trunk)),
		widget.NewFormItem("Expert cache", container.NewBorder(nil, nil, nil, s.CacheLbl, s.Cache)),
	)
	s.view = scroll(container.NewVBox(intro, form, s.Note, s.Verdict, widget.NewCard("Memory plan", "what goes where", s.PlanText)))
	return s
}

func (s *MemoryStep) Title() string           { return "Memory" }
func (s *MemoryStep) View() fyne.CanvasObject { return s.view }

func (s *MemoryStep) Enter() {
	u := s.w.u
	if s.mem == nil && u.B.Planner != nil {
		if m, err := u.B.Planner.Memory(); err == nil {
			s.mem = &m
			top := math.Max(8, math.Ceil(float64(m.TotalBytes)/plan.GB))
			s.Trunk.Max, s.Cache.Max = top, top
		}
	}
	preset := u.S.Preset
	if r := s.w.Machine.Report; r != nil && r.CanRun && (preset == "" || preset == "auto") && u.S.TrunkGB == 0 {
		preset = r.Preset.Name
	}
	if preset == "" {
		preset = "auto"
	}
	if u.S.TrunkGB > 0 || u.S.CacheGB > 0 {
		s.setting = true
		s.Preset.SetSelected(preset)
		s.Trunk.SetValue(u.S.TrunkGB)
		s.Cache.SetValue(u.S.CacheGB)
		s.setting = false
		s.slid()
	} else {
		s.Preset.SetSelected(preset)
	}
	if u.S.TrunkDir == "" {
		s.Note.SetText("The trunk is not packed, so every layer is held in memory and the trunk slider has no effect. Pack it (step 3) to run in less memory.")
	} else {
		s.Note.SetText("")
	}
}

func (s *MemoryStep) presetChosen(name string) {
	b := presetBudget(name, s.mem)
	s.setting = true
	s.Trunk.SetValue(math.Round(b.TrunkGB*2) / 2)
	s.Cache.SetValue(math.Round(b.CacheGB*2) / 2)
	s.setting = false
	s.w.u.S.Preset = name
	s.slid()
}

func (s *MemoryStep) slid() {
	u := s.w.u
	s.TrunkLbl.SetText(fmt.Sprintf("%6.1f GB", s.Trunk.Value))
	s.CacheLbl.SetText(fmt.Sprintf("%6.1f GB", s.Cache.Value))
	u.S.TrunkGB, u.S.CacheGB = s.Trunk.Value, s.Cache.Value
	if !s.setting {
		if p, ok := plan.Lookup(s.Preset.Selected); !ok || p.TrunkGB != s.Trunk.Value || p.CacheGB != s.Cache.Value {
			// the user moved a slider away from the preset: keep the choice visible
			u.S.Preset = s.Preset.Selected
		}
	}
	u.SaveSettings()
	s.Replan()
}

// Replan recomputes the plan in the background (one at a time; the last
// request wins).
func (s *MemoryStep) Replan() {
	u := s.w.u
	if u.B.Planner == nil || u.S.ModelDir == "" {
		return
	}
	if s.busy {
		s.dirty = true
		return
	}
	s.busy = true
	settings := u.S
	mem := s.mem
	go func() {
		p, err := u.B.Planner.Plan(settings.ModelDir, settings.OpenOptions(mem))
		if err == nil && mem != nil {
			err = p.Check(*mem)
		}
		u.do(func() {
			s.busy = false
			if s.dirty {
				s.dirty = false
				s.Replan()
				return
			}
			s.showPlan(p, err)
		})
	}()
}

func (s *MemoryStep) showPlan(p *plan.Plan, err error) {
	s.Plan, s.PlanErr = p, err
	if p != nil {
		s.PlanText.SetText(p.String())
	}
	switch {
	case err != nil && p == nil:
		s.Verdict.SetText(Explain(err))
	case err != nil:
		s.Verdict.SetText("These settings do not fit: " + err.Error())
	case s.mem != nil:
		s.Verdict.SetText(fmt.Sprintf("Fits: the plan needs %s of the %s available.", units.Bytes(p.Total), units.Bytes(s.mem.Usable())))
	default:
		s.Verdict.SetText(fmt.Sprintf("The plan needs %s (the available memory could not be read).", units.Bytes(p.Total)))
	}
	if s.w.u.Wizard == s.w {
		s.w.Changed()
	}
}

func (s *MemoryStep) Ready() (bool, string) {
	switch {
	case s.busy:
		return false, "Computing the memory plan…"
	case s.PlanErr != nil:
		return false, "Lower the sliders or pick a smaller preset: the plan does not fit in memory."
	case s.Plan == nil:
		return false, "Computing the memory plan…"
	}
	return true, ""
}

func (s *MemoryStep) Cancel() {}
