package gui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
	"k3/tokenizer/constrain"
)

// The choices of the Answers field (issue 30 item 4 in the app).
const (
	answersText = "Free text"
	answersJSON = "JSON"
)

// isJSONAnswers reports whether o holds the answer to JSON.
func isJSONAnswers(o chat.Options) bool { return len(o.ResponseFormat) > 0 }

// jsonAnswers holds the answer to one JSON object (on) or to free text.
func jsonAnswers(o *chat.Options, on bool) {
	if on == isJSONAnswers(*o) {
		return // a format kept as it was (a schema set elsewhere stays)
	}
	o.ResponseFormat = nil
	if on {
		o.ResponseFormat = slices.Clone(constrain.ObjectFormat)
	}
}

// settingsForm edits a conversation's system prompt, sampling and reply
// length. Every number field checks itself as it is typed: a bad value is
// marked in place and Save waits until it is fixed, so nothing typed is
// lost.
type settingsForm struct {
	System      *widget.Entry
	ForNew      *widget.Check
	Greedy      *widget.Check
	Temperature *widget.Entry
	TopP        *widget.Entry
	TopK        *widget.Entry
	Seed        *widget.Entry
	MaxTokens   *widget.Entry
	// Answers is free text or JSON: with JSON every reply is one JSON
	// object, held to it token by token (chat.Options.ResponseFormat)
	Answers *widget.RadioGroup
	Items   []*widget.FormItem
}

func floatField(v float64, name string, lo, hi float64) *widget.Entry {
	e := widget.NewEntry()
	e.SetText(strconv.FormatFloat(v, 'g', -1, 64))
	e.Validator = func(t string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil || x < lo || x > hi {
			return fmt.Errorf("%s must be a number from %g to %g", name, lo, hi)
		}
		return nil
	}
	return e
}

func intField(v int, name string, lo, hi int) *widget.Entry {
	e := widget.NewEntry()
	e.SetText(strconv.Itoa(v))
	e.Validator = func(t string) error {
		x, err := strconv.Atoi(strings.TrimSpace(t))
		if err != nil || x < lo || x > hi {
			return fmt.Errorf("%s must be a whole number from %d to %d", name, lo, hi)
		}
		return nil
	}
	return e
}

// newSettingsForm fills the form from a conversation's system prompt
// and settings.
func newSettingsForm(system string, o chat.Options) *settingsForm {
	f := &settingsForm{}
	f.System = widget.NewMultiLineEntry()
	f.System.SetText(system)
	f.System.SetPlaceHolder("optional instructions sent before this conversation")
	f.System.SetMinRowsVisible(4)
	f.System.Wrapping = fyne.TextWrapWord
	f.ForNew = widget.NewCheck("Start new conversations with this system prompt and these settings", nil)
	f.Greedy = widget.NewCheck("Greedy: always the most likely word (the same reply every time)", nil)
	f.Greedy.SetChecked(o.Greedy)
	f.Temperature = floatField(o.Temperature, "Temperature", 0, 5)
	f.TopP = floatField(o.TopP, "Top-p", 0, 1)
	f.TopK = intField(o.TopK, "Top-k", 0, 1<<20)
	f.Seed = intField(int(o.Seed), "Seed", 0, 1<<31-1)
	f.MaxTokens = intField(o.MaxTokens, "Max tokens", 1, 1<<20)
	f.Answers = widget.NewRadioGroup([]string{answersText, answersJSON}, nil)
	f.Answers.Horizontal = true
	f.Answers.Required = true
	f.Answers.SetSelected(answersText)
	if isJSONAnswers(o) {
		f.Answers.SetSelected(answersJSON)
	}
	// G11: greedy decoding ignores the sampling fields: they are off then
	sampling := func(greedy bool) {
		for _, e := range []*widget.Entry{f.Temperature, f.TopP, f.TopK} {
			if greedy {
				e.Disable()
			} else {
				e.Enable()
			}
		}
	}
	f.Greedy.OnChanged = sampling
	sampling(o.Greedy)
	f.Items = []*widget.FormItem{
		widget.NewFormItem("System prompt", f.System),
		widget.NewFormItem("", f.Greedy),
		widget.NewFormItem("Temperature", f.Temperature),
		widget.NewFormItem("Top-p", f.TopP),
		widget.NewFormItem("Top-k (0 = all)", f.TopK),
		widget.NewFormItem("Seed (0 = a new one for Regenerate)", f.Seed),
		widget.NewFormItem("Max tokens per reply", f.MaxTokens),
		{Text: "Answers", Widget: f.Answers, HintText: "JSON: every answer is one JSON object, for programs to read"},
		widget.NewFormItem("", f.ForNew),
	}
	return f
}

// Validate reports the first field that is wrong.
func (f *settingsForm) Validate() error {
	for _, e := range []*widget.Entry{f.Temperature, f.TopP, f.TopK, f.Seed, f.MaxTokens} {
		if err := e.Validator(e.Text); err != nil {
			return err
		}
	}
	return nil
}

// Apply copies the form into o, or says what is wrong (and changes nothing).
func (f *settingsForm) Apply(o *chat.Options) error {
	if err := f.Validate(); err != nil {
		return err
	}
	pf := func(e *widget.Entry) float64 { x, _ := strconv.ParseFloat(strings.TrimSpace(e.Text), 64); return x }
	pi := func(e *widget.Entry) int { x, _ := strconv.Atoi(strings.TrimSpace(e.Text)); return x }
	o.Greedy = f.Greedy.Checked
	o.Temperature, o.TopP, o.TopK, o.Seed, o.MaxTokens = pf(f.Temperature), pf(f.TopP), pi(f.TopK), uint64(pi(f.Seed)), pi(f.MaxTokens)
	jsonAnswers(o, f.Answers.Selected == answersJSON)
	return nil
}

// showChatSettings opens the conversation's settings; Save applies them to
// the next reply.
func (v *chatView) showChatSettings() {
	u := v.u
	f := newSettingsForm(v.SystemPrompt(), v.Opts)
	v.settings = f
	items := append(f.Items, savedPromptsItem())
	d := dialog.NewForm("This conversation's settings", "Save", "Cancel", items, func(ok bool) {
		if !ok {
			return
		}
		if err := f.Apply(&v.Opts); err != nil {
			v.Notice.SetText("Not saved: " + err.Error() + ".") // Save waits for valid fields; this is a last guard
			return
		}
		v.saveOptions()
		if f.System.Text != v.SystemPrompt() {
			v.SetSystemPrompt(f.System.Text)
		}
		if f.ForNew.Checked {
			u.S.SystemPrompt = strings.TrimSpace(f.System.Text)
			u.S.Thinking, u.S.Effort, u.S.MaxTokens, u.S.Sampling = v.Opts.Thinking, v.Opts.Effort, v.Opts.MaxTokens, v.Opts.Sampling
			u.S.JSONAnswers = isJSONAnswers(v.Opts)
			u.SaveSettings()
		}
	}, u.Win)
	size := u.Win.Canvas().Size()
	d.Resize(fyne.NewSize(min(640, size.Width-40), min(560, size.Height-40)))
	d.Show()
}
