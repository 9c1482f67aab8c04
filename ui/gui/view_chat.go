package gui

import (
	"context"
	"fmt"
	"image/color"
	"slices"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
	"k3/tokenizer/xtml"
	"k3/ui/bridge"
)

// chatView is the main view: conversations on the left, the conversation
// in the middle, the engine gauges on the right.
type chatView struct {
	u    *appUI
	Root fyne.CanvasObject

	// Conversation is the conversation shown: its title, messages, own
	// settings and versions, saved through it.
	*bridge.Conversation
	Convs *convList
	// regenSamples: the user agreed once that Regenerate samples while
	// greedy decoding is on; it does not ask again (issue 27, G27)
	regenSamples bool
	// machineSpt is the seconds per token this machine (or server) last
	// measured, from a reply written or a saved one (0: none yet)
	machineSpt float64

	Msgs     *fyne.Container
	scroller *container.Scroll
	Views    []*messageView

	Entry     *chatEntry
	SendBt    *widget.Button
	StopBt    *widget.Button
	RegenBt   *widget.Button
	CancelBt  *widget.Button // cancels an edit in progress
	ExportBt  *widget.Button
	Thinking  *widget.Check
	Effort    *widget.Select
	ContextLb *noteLabel
	Phase     *noteLabel
	Notice    *noteLabel
	// Estimate is the wait to plan with before sending on a slow machine
	Estimate *widget.Label
	// CapLb shows the reply length cap
	CapLb  *widget.Label
	Gauges *gaugesView
	// Picker is the chat header: the model, its state, the switch
	Picker *modelPicker
	// GaugesPanel is the Engine panel at the right, of a fixed width
	GaugesPanel *fyne.Container

	engine   bridge.ChatEngine
	Info     *bridge.ModelInfo
	Busy     bool
	cancel   context.CancelFunc
	pump     *bridge.Pump
	idle     chan struct{} // closed when no turn runs
	stopping bool          // Stop was pressed; the turn is ending
	quitting bool          // the app is closing: the partial reply is saved already
	reply    *messageView  // the reply being written
	settings *settingsForm // the settings dialog's form, while shown
	// contexts are the positions each branch measured here took (chat_context.go)
	contexts map[uint64]int
	typedGen int // the message box's edits, for the estimate's exact count
	// statusLine holds the status line's height once a reply started, so
	// the rows under it stay put (G3); before, an empty line takes no room
	statusLine *canvas.Rectangle
	statusRow  *fyne.Container
	statusHeld bool // statusLine holds the line (from the first reply on)
	// serverDown are the servers (by address) whose last turn failed
	// before any text came: the picker says so
	serverDown map[string]bool
	// servedNote is the app's server's requests, for the model line (G13)
	servedNote string
	// servedPh is the app's server's phase ("": no request holds the
	// engine), for the status line when the app's turn ends
	servedPh string
	// pendingRow shows the pictures waiting for the next message
	pendingRow    *fyne.Container
	pendingThumbs *fyne.Container
}

// newChatView builds the chat and opens the last conversation.
func newChatView(u *appUI) *chatView {
	v := &chatView{u: u, Conversation: bridge.NewConversation(u.conversationsDir()), idle: make(chan struct{})}
	close(v.idle)
	v.newConvList()
	v.Store.SweepLocks()
	v.Msgs = container.NewVBox()
	v.scroller = container.NewVScroll(v.Msgs)
	v.newInput()
	settingsBt := v.newOptions()
	v.newLabels()
	v.Root = v.layout(settingsBt)

	v.reload(u.N.lastConversation())
	if v.Title == "" {
		v.NewConversation()
	}
	v.bindKeys()
	v.refreshButtons()
	return v
}

// newConvList makes the list of conversations on the left and wires its
// actions to the conversation.
func (v *chatView) newConvList() {
	v.Convs = newConvList(v.u.Win)
	v.Convs.OnSelect = v.Open
	v.Convs.OnLeave = v.Focus
	v.Convs.OnNew = v.NewConversation
	v.Convs.OnRename = func(from, to string) {
		if err := v.Rename(from, to); err != nil {
			v.Notice.SetText(err.Error())
		}
	}
	v.Convs.OnDelete = func(t string) {
		if err := v.Delete(t); err != nil {
			v.Notice.SetText(bridge.Explain(err))
		}
	}
	v.Convs.Search = v.Store.Search
	v.Convs.Refuse = func() string {
		if v.Busy {
			return "A reply is being written: wait for it (or press Stop), then delete."
		}
		return ""
	}
}

// newInput makes the message box and its buttons: Send, Stop, Cancel edit
// and Regenerate.
func (v *chatView) newInput() {
	v.Entry = newChatEntry()
	v.Entry.SetMinRowsVisible(3)
	v.Entry.OnSend = v.SendEntry
	v.Entry.OnChanged = func(s string) { // a pasted text says its length (N2)
		v.Entry.wrapFor(s)
		v.typed()
	}
	v.Entry.OnStop = v.escape
	v.Entry.OnTab = func() { v.u.Win.Canvas().FocusNext() }
	v.Entry.OnShortcut = v.shortcut
	v.SendBt = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), v.SendEntry)
	v.SendBt.Importance = widget.HighImportance
	v.StopBt = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), v.Stop)
	v.StopBt.Disable()
	v.CancelBt = widget.NewButtonWithIcon("Cancel edit", theme.CancelIcon(), v.CancelEdit)
	v.CancelBt.Hide()
	v.RegenBt = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), v.Regenerate)
}

// newOptions makes the reply's options (thinking, its effort) and the
// Export button; it returns the Settings button.
func (v *chatView) newOptions() *widget.Button {
	v.Thinking = widget.NewCheck("Thinking", func(b bool) {
		v.Opts.Thinking = b
		v.saveOptions()
		v.refreshButtons()
	})
	v.Effort = widget.NewSelect(xtml.ThinkingEfforts, func(s string) {
		v.Opts.Effort = s
		v.saveOptions()
	})
	v.ExportBt = widget.NewButtonWithIcon("Export…", theme.DocumentSaveIcon(), v.Export)
	return widget.NewButtonWithIcon("Settings…", theme.SettingsIcon(), v.showChatSettings)
}

// newLabels makes what the view says: the context taken, the phase, the
// notice, the estimate, the reply cap and the gauges.
func (v *chatView) newLabels() {
	v.ContextLb = newNoteLabel(false)
	v.ContextLb.Importance = widget.LowImportance
	// whole, not cut: beside the phase a cut label takes no room, and the
	// count read "…" at every size
	v.ContextLb.Truncation = fyne.TextTruncateOff
	v.Phase = newNoteLabel(false)
	v.Notice = newNoteLabel(true)
	v.Notice.Importance = widget.WarningImportance
	v.Estimate = wrapLabel("")
	v.Estimate.Hide()
	v.CapLb = widget.NewLabel("")
	v.CapLb.Importance = widget.LowImportance
	v.Gauges = newGaugesView()
	v.Gauges.SetModel(v.idleModel())
}

// layout places the conversations (left), the messages with the model
// picker above and the status, options and input below (center), and the
// gauges (right).
func (v *chatView) layout(settingsBt *widget.Button) fyne.CanvasObject {
	tools := newFlow(v.Thinking, container.NewHBox(widget.NewLabel("effort"), v.Effort), settingsBt, v.RegenBt, v.ExportBt, v.CapLb)
	inputRow := container.NewBorder(v.newPendingRow(), nil, nil, container.NewVBox(v.SendBt, v.StopBt, v.CancelBt, v.newAttachButton()), v.Entry)
	// the status line: what the model does (left) and the context the
	// conversation takes (right), one line high whether they say anything
	// or not, so the rows under it stay put between streaming and done (G3:
	// they moved 40 px as the context joined the buttons' row)
	v.statusLine = canvas.NewRectangle(color.Transparent) // one line high from the first reply on (startTurn)
	status := container.NewStack(v.statusLine, container.NewBorder(nil, nil, nil, v.ContextLb, v.Phase))
	v.statusRow = status
	v.Phase.changed, v.ContextLb.changed = v.syncStatus, v.syncStatus
	v.syncStatus()
	bottom := container.NewVBox(v.Notice, v.Estimate, status, tools, inputRow)
	v.Picker = newModelPicker(v)
	center := container.NewBorder(v.Picker.Root, bottom, nil, nil, v.keepEnd())
	gsc := container.NewVScroll(container.NewPadded(v.Gauges.Root))
	right := container.New(fixedWidth{Width: gaugesWidth}, gsc)
	v.Gauges.relayout = func() {
		// a wrapped line that gained or lost a row moves what is under it
		gsc.Refresh()
		if c, ok := v.Gauges.Root.(*fyne.Container); ok {
			c.Refresh()
		}
	}
	v.GaugesPanel = right
	if !v.u.gaugesShown() {
		right.Hide()
	}
	left := container.NewPadded(v.Convs.Root)
	split := container.NewHSplit(left, container.New(sidePanel{}, center, right))
	split.Offset = 0.2
	return split
}

// bindKeys binds Escape (stop, or cancel the edit) and the window's
// shortcuts (new conversation, find).
func (v *chatView) bindKeys() {
	c := v.u.Win.Canvas()
	c.SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			v.escape()
		}
	})
	for _, sc := range []*desktop.CustomShortcut{{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault},
		{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault}} {
		c.AddShortcut(sc, func(s fyne.Shortcut) { v.shortcut(s) })
	}
}

// syncStatus shows the status row while it says something or holds its
// line (an empty, visible row would still take a padding).
func (v *chatView) syncStatus() {
	if v.statusRow == nil {
		return
	}
	// while the phase says something it has the whole line (the reading
	// line's passes and time left were cut at 1024x640); the context count
	// comes back with the reply's end
	if v.Phase.Visible() || v.ContextLb.Text == "" {
		v.ContextLb.Hide()
	} else {
		v.ContextLb.Show()
	}
	if v.Phase.Visible() || v.ContextLb.Visible() || v.statusHeld {
		v.statusRow.Show()
	} else {
		v.statusRow.Hide()
	}
}

// showGauges shows or hides the Engine panel.
func (v *chatView) showGauges(on bool) {
	if on {
		v.GaugesPanel.Show()
	} else {
		v.GaugesPanel.Hide()
	}
	if r, ok := v.Root.(*container.Split); ok {
		r.Refresh()
	}
}

// gaugesWidth is the Engine panel's width: fixed, so the chat column and
// its buttons stay where they are whatever the panel shows.
const gaugesWidth = 290

// escape is Esc: it closes the dialog on top, else stops the reply (a
// dialog open during a reply is closed, the reply goes on).
func (v *chatView) escape() {
	if top := v.u.Win.Canvas().Overlays().Top(); top != nil {
		top.Hide()
		v.u.Win.Canvas().Overlays().Remove(top)
		return
	}
	v.Stop()
}

// shortcut runs Ctrl+N (a new conversation) and Ctrl+F (search the
// conversations); it reports whether s was one of them.
func (v *chatView) shortcut(s fyne.Shortcut) bool {
	if p, ok := s.(*fyne.ShortcutPaste); ok && p.Clipboard != nil {
		return v.pastePictures(p.Clipboard.Content()) // a copied picture file
	}
	cs, ok := s.(*desktop.CustomShortcut)
	if !ok || cs.Modifier != fyne.KeyModifierShortcutDefault {
		return false
	}
	switch cs.KeyName {
	case fyne.KeyN:
		v.NewConversation()
	case fyne.KeyF:
		v.u.Win.Canvas().Focus(v.Convs.Query)
	default:
		return false
	}
	return true
}

// Focus puts the cursor in the message box.
func (v *chatView) Focus() { v.u.Win.Canvas().Focus(v.Entry) }

// rebuild shows the messages from index i on again.
func (v *chatView) rebuild(i int) {
	v.Views = v.Views[:min(i, len(v.Views))]
	v.Msgs.Objects = v.Msgs.Objects[:min(i, len(v.Msgs.Objects))]
	for j := len(v.Views); j < len(v.History); j++ {
		v.addView(v.History[j])
	}
	v.Msgs.Refresh()
}

func (v *chatView) addView(m chat.Message) *messageView {
	env := messageEnv{copy: func(s string) { v.u.App.Clipboard().SetContent(s) }, later: v.u.later, version: v.switchVersion,
		relayout: v.relayout, grew: v.grew, scroller: func() *container.Scroll { return v.scroller }}
	if m.Role != "assistant" {
		env.edit = v.Edit
	}
	mv := newMessageView(m, env)
	v.Views = append(v.Views, mv)
	v.Msgs.Add(mv.Root)
	return mv
}

func (v *chatView) refreshButtons() {
	set := func(b *widget.Button, on bool) {
		if on {
			b.Enable()
		} else {
			b.Disable()
		}
	}
	n := len(v.History)
	set(v.SendBt, !v.Busy)
	set(v.StopBt, v.Busy)
	last := ""
	if n > 0 {
		last = v.History[n-1].Role
	}
	set(v.RegenBt, !v.Busy && (last == "assistant" || last == "user"))
	v.CapLb.SetText(fmt.Sprintf("replies up to %d tokens", v.Opts.MaxTokens))
	v.showEstimate()
	set(v.ExportBt, slices.ContainsFunc(v.History, func(m chat.Message) bool { return m.Role != "system" }))
	if last == "user" && !v.Busy {
		v.RegenBt.SetText("Retry")
	} else {
		v.RegenBt.SetText("Regenerate")
	}
	if v.Opts.Thinking {
		v.Effort.Enable()
	} else {
		v.Effort.Disable()
	}
	for _, mv := range v.Views {
		if v.Busy {
			mv.editBt.Disable()
		} else {
			mv.editBt.Enable()
		}
	}
}
