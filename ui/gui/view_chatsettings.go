package gui

import (
	"fmt"
	"strconv"
	"strings"

	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/ui/bridge"
)

// ChatSettingsForm edits the system prompt and the sampling settings.
type ChatSettingsForm struct {
	System      *widget.Entry
	Greedy      *widget.Check
	Temperature *widget.Entry
	TopP        *widget.Entry
	TopK        *widget.Entry
	Seed        *widget.Entry
	MaxTokens   *widget.Entry
	Items       []*widget.FormItem
}

// NewChatSettingsForm fills the form from s.
func NewChatSettingsForm(s bridge.Settings) *ChatSettingsForm {
	f := &ChatSettingsForm{}
	f.System = widget.NewMultiLineEntry()
	f.System.SetText(s.SystemPrompt)
	f.System.SetPlaceHolder("optional instructions sent before the conversation")
	f.System.SetMinRowsVisible(4)
	f.Greedy = widget.NewCheck("Greedy (always the most likely token: the same answer at every memory size)", nil)
	f.Greedy.SetChecked(s.Greedy)
	num := func(v string) *widget.Entry { e := widget.NewEntry(); e.SetText(v); return e }
	f.Temperature = num(strconv.FormatFloat(s.Temperature, 'g', -1, 64))
	f.TopP = num(strconv.FormatFloat(s.TopP, 'g', -1, 64))
	f.TopK = num(strconv.Itoa(s.TopK))
	f.Seed = num(strconv.FormatUint(s.Seed, 10))
	f.MaxTokens = num(strconv.Itoa(s.MaxTokens))
	f.Items = []*widget.FormItem{
		widget.NewFormItem("System prompt", f.System),
		widget.NewFormItem("", f.Greedy),
		widget.NewFormItem("Temperature", f.Temperature),
		widget.NewFormItem("Top-p", f.TopP),
		widget.NewFormItem("Top-k (0 = all)", f.TopK),
		widget.NewFormItem("Seed", f.Seed),
		widget.NewFormItem("Max tokens per reply", f.MaxTokens),
	}
	return f
}

// Apply copies the form into s, or explains what is wrong.
func (f *ChatSettingsForm) Apply(s *bridge.Settings) error {
	pf := func(name, t string, lo, hi float64) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil || v < lo || v > hi {
			return 0, fmt.Errorf("%s must be a number from %g to %g", name, lo, hi)
		}
		return v, nil
	}
	pi := func(name, t string, lo, hi int) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil || v < lo || v > hi {
			return 0, fmt.Errorf("%s must be a whole number from %d to %d", name, lo, hi)
		}
		return v, nil
	}
	temp, err := pf("Temperature", f.Temperature.Text, 0, 5)
	if err != nil {
		return err
	}
	topP, err := pf("Top-p", f.TopP.Text, 0, 1)
	if err != nil {
		return err
	}
	topK, err := pi("Top-k", f.TopK.Text, 0, 1<<20)
	if err != nil {
		return err
	}
	seed, err := pi("Seed", f.Seed.Text, 0, 1<<31-1)
	if err != nil {
		return err
	}
	maxTok, err := pi("Max tokens", f.MaxTokens.Text, 1, 1<<20)
	if err != nil {
		return err
	}
	s.SystemPrompt, s.Greedy = f.System.Text, f.Greedy.Checked
	s.Temperature, s.TopP, s.TopK, s.Seed, s.MaxTokens = temp, topP, topK, uint64(seed), maxTok
	return nil
}

// showChatSettings opens the dialog; saved settings apply to the next turn.
func (v *ChatView) showChatSettings() {
	u := v.u
	f := NewChatSettingsForm(u.S)
	d := dialog.NewForm("System prompt and sampling", "Save", "Cancel", f.Items, func(ok bool) {
		if !ok {
			return
		}
		if err := f.Apply(&u.S); err != nil {
			dialog.ShowInformation("Not saved", err.Error()+".", u.Win)
			return
		}
		u.SaveSettings()
		v.applySystemPrompt()
	}, u.Win)
	d.Resize(u.Win.Canvas().Size().Subtract(u.Win.Canvas().Size()).AddWidthHeight(640, 520))
	d.Show()
}
