package gui

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// wizardStep is one page of the setup wizard.
type wizardStep interface {
	Title() string
	View() fyne.CanvasObject
	// Enter is called each time the step is shown.
	Enter()
	// Ready says whether Next may be pressed, and if not, why.
	Ready() (bool, string)
	// Cancel stops any background work of the step.
	Cancel()
}

// wizard is the setup wizard: This machine, The model, Pack the trunk,
// Memory, Done. Steps report changes with Changed so Next follows them.
// They edit D, a copy of the settings: the working model changes only on
// Done (or when the user, going back to the chat, chooses to keep the
// changes), never while a path is being typed.
type wizard struct {
	u     *appUI
	D     bridge.Settings
	Steps []wizardStep
	Cur   int

	Machine *machineStep
	Model   *modelStep
	Pack    *packStep
	Memory  *memoryStep
	Done    *doneStep

	Root fyne.CanvasObject
	// crumbs are the steps' names; an earlier step, and the next one when
	// Next would go there, can be clicked (issue 27, G20)
	crumbs   *fyne.Container
	CrumbBts []*widget.Button
	title    *widget.Label
	why      *widget.Label
	body     *fyne.Container
	BackBtn  *widget.Button
	NextBtn  *widget.Button
	CloseBtn *widget.Button
}

// newWizard builds the wizard's steps and frame.
func newWizard(u *appUI) *wizard {
	w := &wizard{u: u, D: u.S}
	w.Machine = newMachineStep(w)
	w.Model = newModelStep(w)
	w.Pack = newPackStep(w)
	w.Memory = newMemoryStep(w)
	w.Done = newDoneStep(w)
	w.Steps = []wizardStep{w.Machine, w.Model, w.Pack, w.Memory, w.Done}

	w.crumbs = container.NewHBox()
	for j, st := range w.Steps {
		if j > 0 {
			w.crumbs.Add(widget.NewLabel("›"))
		}
		b := widget.NewButton(fmt.Sprintf("%d %s", j+1, st.Title()), func() {
			if j != w.Cur {
				w.Go(j)
			}
		})
		b.Importance = widget.LowImportance
		w.CrumbBts = append(w.CrumbBts, b)
		w.crumbs.Add(b)
	}
	w.title = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	w.title.SizeName = theme.SizeNameSubHeadingText
	w.why = widget.NewLabel("")
	w.why.Wrapping = fyne.TextWrapWord
	w.body = container.NewStack()
	w.BackBtn = widget.NewButton("Back", func() { w.Go(w.Cur - 1) })
	w.NextBtn = widget.NewButton("Next", func() { w.Go(w.Cur + 1) })
	w.NextBtn.Importance = widget.HighImportance
	w.CloseBtn = widget.NewButton("Back to the chat", w.BackToChat)
	bottom := container.NewBorder(nil, nil, container.NewHBox(w.BackBtn, w.CloseBtn), w.NextBtn, w.why)
	top := container.NewVBox(w.crumbs, w.title, widget.NewSeparator())
	w.Root = container.NewPadded(container.NewBorder(top, container.NewVBox(widget.NewSeparator(), bottom), nil, nil, w.body))
	return w
}

// Go shows step i.
func (w *wizard) Go(i int) {
	if i < 0 || i >= len(w.Steps) {
		return
	}
	w.Cur = i
	s := w.Steps[i]
	for j, b := range w.CrumbBts {
		if j == i {
			b.Importance = widget.MediumImportance
		} else {
			b.Importance = widget.LowImportance
		}
		b.Refresh()
	}
	w.title.SetText(fmt.Sprintf("Step %d of %d: %s", i+1, len(w.Steps), s.Title()))
	w.body.Objects = []fyne.CanvasObject{s.View()}
	w.body.Refresh()
	s.Enter()
	w.Changed()
}

// Changed re-evaluates the buttons after a step's state changed.
func (w *wizard) Changed() {
	s := w.Steps[w.Cur]
	ok, why := s.Ready()
	if w.Cur == 0 {
		w.BackBtn.Disable()
	} else {
		w.BackBtn.Enable()
	}
	if w.Cur == len(w.Steps)-1 {
		w.NextBtn.Hide()
	} else {
		w.NextBtn.Show()
		if ok {
			w.NextBtn.Enable()
		} else {
			w.NextBtn.Disable()
		}
	}
	if w.u.N.wizardDone() && w.u.S.ModelDir != "" {
		w.CloseBtn.Show()
	} else {
		w.CloseBtn.Hide()
	}
	w.why.SetText(why)
	for j, b := range w.CrumbBts {
		if j <= w.Cur || j == w.Cur+1 && ok {
			b.Enable()
		} else {
			b.Disable()
		}
	}
}

// Changes reports whether the setup being edited differs from the one in use.
func (w *wizard) Changes() bool { return w.D.Setup() != w.u.S.Setup() }

// Apply makes the edited setup the one in use (and saves it); the chat
// opens the new model at its next message.
func (w *wizard) Apply() {
	u := w.u
	changed := w.Changes()
	u.S.SetSetup(w.D.Setup())
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	if changed && u.Chat != nil {
		u.Chat.ResetEngine()
	}
}

// BackToChat returns to the chat; with changes to the setup it asks first
// whether to use them or keep the setup in use.
func (w *wizard) BackToChat() {
	if !w.Changes() {
		w.u.ShowChat()
		return
	}
	d := dialog.NewCustomConfirm("Use the new setup?",
		"Use the new setup", "Keep the one in use",
		wrapLabel("You changed the model, the trunk or the memory settings. The chat can switch to them now, or keep running what it ran before."),
		func(use bool) {
			if use {
				w.Apply()
			}
			w.u.ShowChat()
		}, w.u.Win)
	d.Show()
}

// Cancel stops every step's background work.
func (w *wizard) Cancel() {
	for _, s := range w.Steps {
		s.Cancel()
	}
}

// scroll wraps a step's content so it fits at 1280x800 and below.
func scroll(o fyne.CanvasObject) fyne.CanvasObject { return container.NewVScroll(o) }

// wrapLabel is a label that wraps words.
func wrapLabel(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// setNote shows text in a label, and hides the label when text is empty so
// an empty line does not leave a gap.
func setNote(l *widget.Label, text string) {
	l.SetText(text)
	if text == "" {
		l.Hide()
	} else {
		l.Show()
	}
}
