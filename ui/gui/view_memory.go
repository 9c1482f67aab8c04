package gui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/data/binding"
	"fyne.io/fyne/v2/widget"

	"k3/engine"
	"k3/engine/plan"
	"k3/storage/units"
	"k3/ui/bridge"
)

// sliderStep is the sliders' resolution in GB.
const sliderStep = 0.1

// presetNotes describe the presets in plain words (the peak memory is the
// planned peak of the full model at that preset).
var presetNotes = map[string]string{
	"ultra":             "The least memory (about 3.6 GB): even the word tables are read from disk. Very slow.",
	"laptop":            "About 7 GB of memory at the peak: for machines with 16 GB.",
	"desktop":           "About 32 GB at the peak: for machines with 48 to 64 GB.",
	"workstation":       "About 96 GB at the peak; the expert cache starts to pay off.",
	"server":            "About 128 GB at the peak: almost all the shared weights in memory. Fast.",
	"max":               "About 224 GB at the peak: the shared weights in memory and a large expert cache.",
	"auto":              "Fits what this machine has free now (container limits included). Recommended.",
	bridge.CustomPreset: "Your own sizes, set with the sliders (0 GB gives the smallest plan).",
}

// memoryStep is wizard step 4: a preset and two budgets, with the memory
// plan recomputed live and impossible settings refused before anything is
// loaded. The sliders are bound to two floats; moving one away from the
// preset's values makes the preset "custom".
type memoryStep struct {
	w    *wizard
	view fyne.CanvasObject

	Preset     *widget.Select
	PresetNote *widget.Label
	TrunkGB    binding.Float
	CacheGB    binding.Float
	Trunk      *widget.Slider
	Cache      *widget.Slider
	Note       *widget.Label
	PlanText   *planTable
	Verdict    *widget.Label

	mem     *plan.Memory
	Plan    *plan.Plan
	PlanErr error
	TooBig  bool // the plan was made and does not fit in memory
	busy    bool
	dirty   bool
	// model is the model folder the preset was chosen for: another model
	// starts from the machine's choice again (N5: "max" chosen for the demo
	// was carried to the next model)
	model string
}

func newMemoryStep(w *wizard) *memoryStep {
	s := &memoryStep{w: w}
	s.Preset = widget.NewSelect(append(plan.Names(), bridge.CustomPreset), s.presetChosen)
	s.PresetNote = wrapLabel("")
	s.TrunkGB, s.CacheGB = binding.NewFloat(), binding.NewFloat()
	s.Trunk = widget.NewSliderWithData(0, 128, s.TrunkGB)
	s.Trunk.Step = sliderStep
	s.Cache = widget.NewSliderWithData(0, 128, s.CacheGB)
	s.Cache.Step = sliderStep
	trunkLbl := widget.NewLabelWithData(binding.FloatToStringWithFormat(s.TrunkGB, "%6.1f GB"))
	cacheLbl := widget.NewLabelWithData(binding.FloatToStringWithFormat(s.CacheGB, "%6.1f GB"))
	s.Note = wrapLabel("")
	s.PlanText = newPlanTable()
	s.Verdict = wrapLabel("")
	s.Verdict.TextStyle = fyne.TextStyle{Bold: true}
	intro := wrapLabel("Memory decides speed: every GB given to the shared weights (step 3's packed file) saves reading them from disk for every word; " +
		"the expert cache keeps recently used experts. The plan below adds up everything before anything is loaded.")
	form := widget.NewForm(
		widget.NewFormItem("Preset", s.Preset),
		widget.NewFormItem("", s.PresetNote),
		widget.NewFormItem("Shared weights in memory", container.NewBorder(nil, nil, nil, trunkLbl, s.Trunk)),
		widget.NewFormItem("Expert cache", container.NewBorder(nil, nil, nil, cacheLbl, s.Cache)),
	)
	// the plan's rows wrap: nothing scrolls sideways, the wheel scrolls the step (G14)
	s.view = container.NewVScroll(container.NewVBox(intro, form, s.Note, s.Verdict, widget.NewCard("Memory plan", "what goes where", s.PlanText.Root)))
	// the sliders start at the setup's values, so the listeners' first
	// call (when added) sees no change
	if d := w.D; d.Preset == bridge.CustomPreset {
		s.setSliders(d.TrunkGB, d.CacheGB)
	} else {
		b := bridge.PresetBudget(d.Preset, nil)
		s.setSliders(b.TrunkGB, b.CacheGB)
	}
	s.TrunkGB.AddListener(binding.NewDataListener(func() { s.slid(s.TrunkGB, 0) }))
	s.CacheGB.AddListener(binding.NewDataListener(func() { s.slid(s.CacheGB, 1) }))
	return s
}

func (s *memoryStep) Title() string           { return "Memory" }
func (s *memoryStep) View() fyne.CanvasObject { return s.view }

func (s *memoryStep) Enter() {
	u, d := s.w.u, &s.w.D
	if s.mem == nil && u.B.Planner != nil {
		if m, err := u.B.Planner.Memory(); err == nil {
			s.mem = &m
			top := math.Max(8, math.Ceil(float64(m.TotalBytes)/plan.GB))
			s.Trunk.Max, s.Cache.Max = top, top
		}
	}
	preset := d.Preset
	if s.model != "" && s.model != d.ModelDir && preset != bridge.CustomPreset {
		preset = "auto"
	}
	s.model = d.ModelDir
	if r := s.w.Machine.Report; r != nil && r.CanRun && (preset == "" || preset == "auto") {
		preset = r.Preset.Name
	}
	if !slices.Contains(s.Preset.Options, preset) {
		preset = "auto"
	}
	if preset == bridge.CustomPreset {
		s.setSliders(d.TrunkGB, d.CacheGB)
	}
	s.Preset.SetSelected(preset)
	if d.TrunkDir == "" {
		setNote(s.Note, "The shared weights are not packed, so every layer is held in memory and their slider has no effect. Pack them (step 3) to run in less memory.")
	} else {
		setNote(s.Note, "")
	}
	s.Replan()
}

// setSliders moves the sliders to trunk and cache GB, within their range
// (N5: a value past the end drew the track through the label, no thumb).
func (s *memoryStep) setSliders(trunk, cache float64) {
	_ = s.TrunkGB.Set(math.Min(math.Round(trunk/sliderStep)*sliderStep, s.Trunk.Max))
	_ = s.CacheGB.Set(math.Min(math.Round(cache/sliderStep)*sliderStep, s.Cache.Max))
}

// OverMachine is how much memory the preset asks for trunk and cache,
// when that is more than this machine has (0 otherwise).
func (s *memoryStep) OverMachine() float64 {
	d := s.w.D
	if d.Preset == bridge.CustomPreset || s.mem == nil {
		return 0
	}
	b := bridge.PresetBudget(d.Preset, s.mem)
	if t := b.TrunkGB + b.CacheGB; t > float64(s.mem.TotalBytes)/plan.GB {
		return t
	}
	return 0
}

func (s *memoryStep) presetChosen(name string) {
	d := &s.w.D
	d.Preset = name
	s.PresetNote.SetText(presetNotes[name])
	if name != bridge.CustomPreset {
		b := bridge.PresetBudget(name, s.mem)
		t, c := b.TrunkGB, b.CacheGB
		d.TrunkGB, d.CacheGB = t, c
		s.setSliders(t, c)
		if s.mem != nil {
			if have := float64(s.mem.TotalBytes) / plan.GB; t+c > have {
				s.PresetNote.SetText(presetNotes[name] + fmt.Sprintf(" This preset needs about %.0f GB for the shared weights and the expert cache alone; this machine has %.0f GB.", t+c, have))
			}
		}
	}
	s.Replan()
}

// slid follows one slider (which: 0 trunk, 1 cache): a value away from the
// preset's makes the preset custom. Each slider is compared on its own, so
// a preset setting both never looks like a change by hand.
func (s *memoryStep) slid(f binding.Float, which int) {
	d := &s.w.D
	v, _ := f.Get()
	if d.Preset != bridge.CustomPreset {
		b := bridge.PresetBudget(d.Preset, s.mem)
		pt, pc := b.TrunkGB, b.CacheGB
		want, top := []float64{pt, pc}[which], []float64{s.Trunk.Max, s.Cache.Max}[which]
		if math.Abs(want-v) <= sliderStep/2+1e-9 {
			return
		}
		if want > top && math.Abs(v-top) <= sliderStep/2+1e-9 {
			return // the slider stops at the machine's memory: the preset is still the one chosen (G9)
		}
		d.Preset = bridge.CustomPreset
		s.Preset.SetSelected(bridge.CustomPreset)
	}
	d.TrunkGB, _ = s.TrunkGB.Get()
	d.CacheGB, _ = s.CacheGB.Get()
	s.Replan()
}

// Replan recomputes the plan in the background (one at a time; the last
// request wins).
func (s *memoryStep) Replan() {
	u := s.w.u
	if u.B.Planner == nil || s.w.D.ModelDir == "" {
		return
	}
	if s.busy {
		s.dirty = true
		return
	}
	s.busy = true
	settings := s.w.D
	mem := s.mem
	pl := u.B.Planner
	var p *plan.Plan
	tooBig := false
	bridge.StartJob(u.do, 1, func(context.Context, func(struct{})) error {
		var err error
		p, err = pl.Plan(settings.ModelDir, settings.OpenOptions(mem))
		var pe *engine.PlanError
		if errors.As(err, &pe) { // not even 64 prompt positions per pass fit
			p, tooBig = pe.Plan, true
			return err
		}
		if err == nil && mem != nil {
			err = p.Check(*mem)
			tooBig = err != nil
		}
		return err
	}, nil, func(err error) {
		s.busy = false
		if s.dirty {
			s.dirty = false
			s.Replan()
			return
		}
		s.TooBig = tooBig
		s.showPlan(p, err)
	})
}

func (s *memoryStep) showPlan(p *plan.Plan, err error) {
	s.Plan, s.PlanErr = p, err
	s.PlanText.SetText("")
	if p != nil {
		s.PlanText.SetText(p.String())
	}
	switch {
	case s.w.Model.Err() != nil:
		s.Verdict.SetText("The model folder cannot be used: " + bridge.Explain(s.w.Model.Err()) + " Go back to step 2.")
	case err != nil && !s.TooBig:
		s.Verdict.SetText(bridge.Explain(err))
	case err != nil:
		s.Verdict.SetText(fmt.Sprintf("These settings do not fit: the plan needs %s, and %s of the %s available is the most k3 plans for. Lower the sliders or pick a smaller preset.",
			units.Bytes(p.Total), units.Bytes(int64(0.95*float64(s.mem.Usable()))), units.Bytes(s.mem.Usable())))
	case s.mem != nil:
		s.Verdict.SetText(fmt.Sprintf("Fits: the plan needs %s of the %s available.", units.Bytes(p.Total), units.Bytes(s.mem.Usable())) + s.firstReply())
	default:
		s.Verdict.SetText(fmt.Sprintf("The plan needs %s (the available memory could not be read).", units.Bytes(p.Total)))
	}
	if s.w.u.wizard == s.w {
		s.w.Changed()
	}
}

// firstReply is the predicted wait for the first word of a reply to a
// short question (100 positions) at the chosen preset, from the machine
// check ("" without one).
func (s *memoryStep) firstReply() string {
	r := s.w.Machine.Report
	if r == nil {
		return ""
	}
	for _, p := range r.AllPresets {
		if p.Name == s.w.D.Preset && p.PrefillChunk > 0 {
			return fmt.Sprintf(" With the full model a short question is answered after about %s (its first word; a prompt is read %d tokens at a time).",
				bridge.Duration(time.Duration(p.FirstToken100*float64(time.Second))), p.PrefillChunk)
		}
	}
	return ""
}

func (s *memoryStep) Ready() (bool, string) {
	switch {
	case s.w.Model.Err() != nil:
		return false, "The model folder cannot be used (see step 2)."
	case s.busy:
		return false, "Computing the memory plan…"
	case s.PlanErr != nil && !s.TooBig:
		return false, "The memory plan cannot be made for this model (see above)."
	case s.PlanErr != nil:
		return false, "Lower the sliders or pick a smaller preset: the plan does not fit in memory."
	case s.Plan == nil:
		return false, "Computing the memory plan…"
	}
	return true, ""
}

func (s *memoryStep) Cancel() {}
