package gui

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"

	"k3/engine/chat"
	"k3/tokenizer/xtml"
	"k3/ui/bridge"
)

// The chat view's conversations: opening, creating, renaming, deleting
// and saving them (bridge.Conversation holds the one shown).

func (v *chatView) reload(want string) {
	titles, err := v.Store.List()
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
	}
	sel := ""
	for _, t := range titles {
		if t == want {
			sel = t
		}
	}
	if sel == "" && len(titles) > 0 {
		sel = titles[0]
	}
	v.Convs.SetTitles(titles, sel)
	if sel != "" && sel != v.Title {
		v.Open(sel)
	}
}

// Open shows a saved conversation. While a reply is being written, or when
// the file cannot be read, the conversation shown stays, and so does its
// highlight in the list.
func (v *chatView) Open(title string) {
	if title == "" || title == v.Title && v.History != nil {
		v.Convs.Highlight(v.Title)
		return
	}
	if v.Busy {
		v.Notice.SetText("A reply is being written: wait for it (or press Stop), then switch conversations.")
		v.Convs.Highlight(v.Title)
		return
	}
	notice, err := v.Conversation.Open(title, v.u.S.ConvDefaults())
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
		v.Convs.Highlight(v.Title)
		return
	}
	opts := v.Opts
	v.endEdit()
	v.u.N.LastConversation.Set(title)
	v.Thinking.SetChecked(opts.Thinking)
	v.Effort.SetSelected(opts.Effort)
	v.rebuild(0)
	v.Convs.Highlight(title)
	v.Notice.SetText(notice)
	v.Phase.SetText("")
	v.ContextLb.SetText("")
	v.showSavedGauges()
	if st := v.Gauges.G.Saved; st != nil && st.SecondsPerToken > 0 {
		v.machineSpt = st.SecondsPerToken
	}
	v.lowEffortWhenSlow()
	v.refreshButtons()
	v.scrollToEnd()
}

// slowSecPerToken is the speed from which a new conversation thinks at low
// effort: at a second or more per token, thinking at the default effort
// (often thousands of tokens) takes hours.
const slowSecPerToken = 1.0

// lowEffortWhenSlow sets a conversation with no reply yet to low thinking
// effort when this machine is slow and the effort is still the default, and
// says why (issue 27, item 2). The user can choose another effort.
func (v *chatView) lowEffortWhenSlow() {
	if v.machineSpt < slowSecPerToken || !v.Opts.Thinking || v.Opts.Effort != xtml.DefaultThinkingEffort || v.Opts.Effort == "low" {
		return
	}
	if slices.ContainsFunc(v.History, func(m chat.Message) bool { return m.Role == "assistant" }) {
		return
	}
	v.Opts.Effort = "low"
	v.Effort.SetSelected("low")
	note := fmt.Sprintf("Thinking effort is set to low: this machine writes about %.1f s per token, "+
		"so thinking at %s effort could take %s or more. Choose another effort beside Thinking if you can wait.",
		v.machineSpt, xtml.DefaultThinkingEffort, bridge.Duration(time.Duration(1000*v.machineSpt*float64(time.Second))))
	if v.Notice.Text != "" {
		note = v.Notice.Text + " " + note
	}
	v.Notice.SetText(note)
}

// showSavedGauges puts the gauges on the conversation just opened: the
// turn before was another conversation's, so its numbers go, and the
// opened one's last reply shows the numbers its history keeps (as under
// the reply itself). Memory and the plots are the process's: they stay.
func (v *chatView) showSavedGauges() {
	var st *chat.ReplyStats
	for i := len(v.History) - 1; i >= 0; i-- {
		if v.History[i].Role == "assistant" {
			st = v.History[i].Stats
			break
		}
	}
	var g bridge.Gauges
	v.gaugePump().WithMeter(func(m *bridge.Meter) {
		m.OpenConversation(st)
		g = m.Gauges()
	})
	v.Gauges.Set(g)
}

// NewConversation starts an empty conversation (with the default system
// prompt, if one is set).
func (v *chatView) NewConversation() {
	if v.Busy {
		v.Notice.SetText("A reply is being written: wait for it (or press Stop), then start a new conversation.")
		return
	}
	t, err := v.Conversation.New(chat.AutoTitlePrefix+time.Now().Format("2006-01-02 15.04"), v.u.S.SystemPrompt)
	if t == "" {
		v.Notice.SetText(bridge.Explain(err))
		return
	}
	if err != nil { // the system prompt was not saved
		v.Notice.SetText(bridge.Explain(err))
	}
	v.Title, v.History = "", nil
	v.reload(t)
	v.Focus() // ready to type, as in every chat app
}

// Rename renames a conversation.
func (v *chatView) Rename(from, to string) error {
	if v.Busy {
		return fmt.Errorf("wait until the reply is finished (or press Stop) before renaming")
	}
	open := v.Title == from
	t, err := v.Conversation.Rename(from, to)
	var re *chat.RenamedError
	if err != nil && !errors.As(err, &re) {
		return err
	}
	if open {
		v.u.N.LastConversation.Set(t)
	}
	v.reload(v.Title)
	return err
}

// Delete removes a conversation and opens another (or a new one).
func (v *chatView) Delete(title string) error {
	if v.Busy {
		return fmt.Errorf("wait until the reply is finished (or press Stop) before deleting")
	}
	if err := v.Conversation.Delete(title); err != nil {
		return err
	}
	v.reload("")
	if v.Title == "" {
		v.NewConversation()
	}
	return nil
}

func (v *chatView) save() {
	moved, err := v.Conversation.Save()
	if moved {
		// another k3 wrote the file: this conversation went beside it and
		// continues there
		v.u.N.LastConversation.Set(v.Title)
		if titles, lerr := v.Store.List(); lerr == nil {
			v.Convs.SetTitles(titles, v.Title)
		}
		v.Notice.SetText(fmt.Sprintf("Another k3 changed or holds this conversation's file, so it was saved as %q instead; nothing was lost.", v.Title))
		return
	}
	if err != nil {
		v.Notice.SetText("The conversation could not be saved: " + bridge.Explain(err))
	}
}

func (v *chatView) saveOptions() {
	if err := v.Conversation.SaveOptions(); err != nil {
		v.Notice.SetText("The conversation's settings could not be saved: " + bridge.Explain(err))
	}
}

// SetSystemPrompt puts sys at the head of the current conversation (or
// removes the system prompt when empty). The next reply reads the whole
// conversation again.
func (v *chatView) SetSystemPrompt(sys string) {
	if v.Busy || !v.Conversation.SetSystemPrompt(sys) {
		return
	}
	v.save()
	v.rebuild(0)
	v.refreshButtons()
}

// Export writes the conversation as a Markdown file the user chooses.
func (v *chatView) Export() {
	md := chat.Markdown(v.Title, v.History)
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		defer w.Close()
		if _, err := w.Write([]byte(md)); err != nil {
			v.Notice.SetText("The conversation could not be exported: " + bridge.Explain(err))
			return
		}
		v.Phase.SetText("exported: " + filepath.Base(w.URI().Path())) // G29: the name, not a cut-off path
	}, v.u.Win)
	d.SetFileName(v.Title + ".md")
	d.Show()
}
