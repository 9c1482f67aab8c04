package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/engine/plan"
	"k3/storage/units"
	"k3/ui/bridge"
)

// doneStep is wizard step 5: a summary and the way into the chat.
type doneStep struct {
	w       *wizard
	view    fyne.CanvasObject
	Summary *widget.Label
	OpenBt  *widget.Button
}

func newDoneStep(w *wizard) *doneStep {
	s := &doneStep{w: w}
	s.Summary = wrapLabel("")
	s.OpenBt = widget.NewButton("Open the chat", s.Finish)
	s.OpenBt.Importance = widget.HighImportance
	s.view = container.NewVBox(s.Summary, s.OpenBt,
		wrapLabel("You can run this wizard again any time from the k3 menu (Setup wizard…)."))
	return s
}

func (s *doneStep) Title() string           { return "Done" }
func (s *doneStep) View() fyne.CanvasObject { return s.view }
func (s *doneStep) Ready() (bool, string)   { return true, "" }
func (s *doneStep) Cancel()                 {}

func (s *doneStep) Enter() {
	st := s.w.D
	var b strings.Builder
	model := st.ModelDir
	_, trained := s.w.u.B.IsDemo(st.ModelDir)
	switch {
	case st.Demo && trained:
		model += " (DEMO model: trained on sayings and coloured shapes, it knows little else)"
	case st.Demo:
		model += " (DEMO model: random weights, its text is not meaningful)"
	}
	fmt.Fprintf(&b, "Model: %s\n", model)
	if st.Layers > 0 {
		fmt.Fprintf(&b, "Layers: only the first %d (the output is not the model's)\n", st.Layers)
	}
	if st.TrunkDir != "" && st.TrunkModel == st.ModelDir {
		fmt.Fprintf(&b, "Packed shared weights: %s", st.TrunkDir)
		if c := s.w.Pack.State; c.Status == bridge.TrunkPacked && s.w.Pack.checked == st.TrunkDir {
			fmt.Fprintf(&b, " (%s)", kindWords(c.Compressed))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("Packed shared weights: none (every layer in memory)\n")
	}
	if over := s.w.Memory.OverMachine(); over > 0 && s.w.Memory.mem != nil {
		// the step 4 note's numbers, not the preset's 110/109 GB beside
		// sliders at the machine's 26 GB (N5)
		fmt.Fprintf(&b, "Memory: preset %s, which asks for about %.0f GB; this machine has %.0f GB\n", st.Preset, over,
			float64(s.w.Memory.mem.TotalBytes)/plan.GB)
	} else {
		fmt.Fprintf(&b, "Memory: preset %s, shared weights %.1f GB, expert cache %.1f GB\n", st.Preset, st.TrunkGB, st.CacheGB)
	}
	if s.w.Changes() && s.w.u.N.wizardDone() {
		b.WriteString("\nThe chat switches to this setup when you open it.\n")
	}
	if p := s.w.Memory.Plan; p != nil {
		fmt.Fprintf(&b, "Planned peak memory: %s\n", units.Bytes(p.Total))
	}
	if r := s.w.Machine.Report; r != nil && r.CanRun && !st.Demo {
		fmt.Fprintf(&b, "Expected speed: about %.1f s per token with the %s preset\n", r.Preset.PredictedSecondsPerToken, r.Preset.Name)
	}
	s.Summary.SetText(b.String())
}

// Finish makes the setup the one in use and opens the chat.
func (s *doneStep) Finish() {
	s.w.Apply()
	s.w.u.ShowChat()
}
