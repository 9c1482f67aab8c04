package gui

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"fyne.io/fyne/v2/dialog"

	"k3/engine/chat"
)

// The chat view's versions: Regenerate, editing a message, switching
// between the versions at a message.

// Regenerate replaces the last reply with a new one (the old one stays a
// version: ‹ 1/2 ›), or, after a turn that failed, tries again. A new seed
// is drawn unless the user fixed one; when greedy decoding (or a fixed
// seed) would give the same reply again, it asks first.
func (v *chatView) Regenerate() {
	if v.Busy {
		return
	}
	v.CancelEdit()
	n := len(v.History)
	if n == 0 {
		return
	}
	if v.History[n-1].Role == "user" {
		v.startTurn(v.Opts)
		return
	}
	if v.History[n-1].Role != "assistant" {
		return
	}
	opt := v.Opts
	// the file keeps the old reply until the new one is there
	run := func(opt chat.Options) {
		v.Fork(n - 1)
		v.truncateViews(n - 1)
		v.startTurn(opt)
	}
	switch {
	case opt.Greedy && v.regenSamples:
		// asked once already: Regenerate samples without asking again
		opt.Greedy = false
		opt.Seed = rand.Uint64N(1<<31-1) + 1
		run(opt)
	case opt.Greedy:
		opt.Greedy = false
		opt.Seed = rand.Uint64N(1<<31-1) + 1
		dialog.ShowConfirm("Greedy decoding is on",
			fmt.Sprintf("Greedy decoding always picks the most likely word, so the same reply would come again. "+
				"Regenerate with sampling instead (temperature %g, top-p %g, a new seed)? "+
				"Until the app closes Regenerate then samples without asking; Settings… turns greedy off for good.",
				opt.Temperature, opt.TopP),
			func(ok bool) {
				if ok {
					v.regenSamples = true
					run(opt)
				}
			}, v.u.Win)
	case opt.Seed != 0:
		fixed := opt.Seed
		opt.Seed = rand.Uint64N(1<<31-1) + 1
		dialog.ShowConfirm("The seed is fixed",
			fmt.Sprintf("The seed is fixed at %d, so the same reply would come again. Regenerate once with a new seed? "+
				"(Set the seed to 0 in Settings… for a new one every time.)", fixed),
			func(ok bool) {
				if ok {
					run(opt)
				}
			}, v.u.Win)
	default:
		opt.Seed = rand.Uint64N(1<<31-1) + 1
		run(opt)
	}
}

// switchVersion shows the previous or next version at a message.
func (v *chatView) switchVersion(mv *messageView, delta int) {
	i := slices.Index(v.Views, mv)
	if v.Busy || v.Editing() || i < 0 {
		return
	}
	if v.SwitchVersion(i, delta) {
		v.save()
		v.rebuild(i)
		v.refreshButtons()
		v.showContext() // the shown branch's count (G22)
	}
}

// Edit takes a message back into the message box so it can be changed and
// sent again. The conversation from there on stays as a version (‹ 1/2 ›)
// and comes back with Cancel edit. A system prompt is edited in Settings….
func (v *chatView) Edit(mv *messageView) {
	if v.Busy {
		return
	}
	v.CancelEdit()
	i := slices.Index(v.Views, mv)
	if i < 0 {
		return
	}
	if v.History[i].Role == "system" {
		v.showChatSettings()
		return
	}
	text := v.Conversation.Edit(i)
	v.truncateViews(i)
	v.CancelBt.Show()
	v.Entry.SetText(text)
	v.Focus()
	v.refreshButtons()
}

// CancelEdit brings back the conversation as it was before Edit.
func (v *chatView) CancelEdit() {
	if !v.Editing() || v.Busy {
		return
	}
	i := v.Conversation.CancelEdit()
	v.endEdit()
	v.Entry.SetText("")
	v.rebuild(i)
	v.refreshButtons()
}

// endEdit leaves editing (Open and Send; CancelEdit brings the old text back first).
func (v *chatView) endEdit() {
	v.Conversation.EndEdit()
	v.CancelBt.Hide()
}

// truncateViews drops the views from message n on.
func (v *chatView) truncateViews(n int) {
	v.Views = v.Views[:n]
	v.Msgs.Objects = v.Msgs.Objects[:n]
	v.Msgs.Refresh()
}
