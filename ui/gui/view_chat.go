package gui

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
	"k3/tokenizer"
	"k3/ui/bridge"
)

// chatView is the main view: conversations on the left, the conversation
// in the middle, the engine gauges on the right.
type chatView struct {
	u    *appUI
	Root fyne.CanvasObject

	store   chat.Store
	Convs   *convList
	Current string
	// lock is Current's history lock, held while it is open here (nil when
	// another k3 has it: what is written then goes beside it)
	lock    *chat.HistoryLock
	History []chat.Message
	// Opts are the current conversation's own settings.
	Opts chat.Options
	// fork holds the versions at the message an edit or a Regenerate is
	// replacing, until the new version has its first message.
	fork *bridge.Fork
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
	ContextLb *widget.Label
	Phase     *widget.Label
	Notice    *widget.Label
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
	editing  bool          // a message is back in the box to be changed (fork holds its versions)
	reply    *messageView  // the reply being written
	settings *settingsForm // the settings dialog's form, while shown
	// contexts are the positions each branch measured here took (chat_context.go)
	contexts map[uint64]int
}

// newChatView builds the chat and opens the last conversation.
func newChatView(u *appUI) *chatView {
	v := &chatView{u: u, store: chat.Store{Dir: u.conversationsDir()}, idle: make(chan struct{})}
	close(v.idle)
	v.Convs = newConvList(u.Win)
	v.Convs.OnSelect = v.Open
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

	v.Store.SweepLocks()
	v.Msgs = container.NewVBox()
	v.scroller = container.NewVScroll(v.Msgs)
	v.Entry = newChatEntry()
	v.Entry.SetMinRowsVisible(3)
	v.Entry.OnSend = v.SendEntry
	v.Entry.OnStop = v.escape
	v.Entry.OnTab = func() { u.Win.Canvas().FocusNext() }
	v.Entry.OnShortcut = v.shortcut
	v.SendBt = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), v.SendEntry)
	v.SendBt.Importance = widget.HighImportance
	v.StopBt = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), v.Stop)
	v.StopBt.Disable()
	v.CancelBt = widget.NewButtonWithIcon("Cancel edit", theme.CancelIcon(), v.CancelEdit)
	v.CancelBt.Hide()
	v.RegenBt = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), v.Regenerate)
	v.Thinking = widget.NewCheck("Thinking", func(b bool) {
		v.Opts.Thinking = b
		v.saveOptions()
		v.refreshButtons()
		v.thinkingNote() // G28
	})
	v.Effort = widget.NewSelect(tokenizer.ThinkingEfforts, func(s string) {
		v.Opts.Effort = s
		v.saveOptions()
	})
	settingsBt := widget.NewButtonWithIcon("Settings…", theme.SettingsIcon(), v.showChatSettings)
	v.ExportBt = widget.NewButtonWithIcon("Export…", theme.DocumentSaveIcon(), v.Export)
	v.ContextLb = widget.NewLabel("")
	v.ContextLb.Importance = widget.LowImportance
	v.Phase = widget.NewLabel("")
	v.Phase.Truncation = fyne.TextTruncateEllipsis
	v.Notice = wrapLabel("")
	v.Notice.Importance = widget.WarningImportance
	v.Estimate = wrapLabel("")
	v.Estimate.Hide()
	v.CapLb = widget.NewLabel("")
	v.CapLb.Importance = widget.LowImportance
	v.Gauges = newGaugesView()

	tools := newFlow(v.Thinking, container.NewHBox(widget.NewLabel("effort"), v.Effort), settingsBt, v.RegenBt, v.ExportBt, v.CapLb, v.ContextLb)
	inputRow := container.NewBorder(nil, nil, nil, container.NewVBox(v.SendBt, v.StopBt, v.CancelBt), v.Entry)
	bottom := container.NewVBox(v.Notice, v.Estimate, v.Phase, tools, inputRow)
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
	if !u.gaugesShown() {
		right.Hide()
	}
	left := container.NewPadded(v.Convs.Root)
	split := container.NewHSplit(left, container.NewBorder(nil, nil, nil, right, center))
	split.Offset = 0.2
	v.Root = split

	v.reload(u.N.lastConversation())
	if v.Title == "" {
		v.NewConversation()
	}
	u.Win.Canvas().SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			v.escape()
		}
	})
	for _, sc := range []*desktop.CustomShortcut{{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault},
		{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault}} {
		u.Win.Canvas().AddShortcut(sc, func(s fyne.Shortcut) { v.shortcut(s) })
	}
	v.refreshButtons()
	return v
}

// showEstimate shows, before sending on a slow machine, the wait to plan
// with: from the speed this machine measured on the last reply (this
// turn's, else the conversation's last saved one).
func (v *chatView) showEstimate() {
	g := v.Gauges.G
	spt, ttft := g.SecPerToken, g.TTFT
	if g.Tokens == 0 && g.Saved != nil {
		spt, ttft = g.Saved.SecondsPerToken, g.Saved.FirstTokenSeconds
	}
	setNote(v.Estimate, "")
	if !v.Busy {
		setNote(v.Estimate, bridge.Estimate(spt, ttft, v.Opts.MaxTokens))
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
	h, err := v.Store.Load(title)
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
		v.Convs.Highlight(v.Title)
		return
	}
	opts, ok, err := v.Store.LoadOptions(title)
	if err != nil || !ok {
		opts = v.u.S.ConvDefaults()
	}
	notice := v.hold(title)
	v.Title, v.History, v.Opts = title, h, opts
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
	if v.machineSpt < slowSecPerToken || !v.Opts.Thinking || v.Opts.Effort != tokenizer.DefaultThinkingEffort || v.Opts.Effort == "low" {
		return
	}
	if slices.ContainsFunc(v.History, func(m chat.Message) bool { return m.Role == "assistant" }) {
		return
	}
	v.Opts.Effort = "low"
	v.Effort.SetSelected("low")
	note := fmt.Sprintf("Thinking effort is set to low: this machine writes about %.1f s per token, "+
		"so thinking at %s effort could take %s or more. Choose another effort beside Thinking if you can wait.",
		v.machineSpt, tokenizer.DefaultThinkingEffort, bridge.Duration(time.Duration(1000*v.machineSpt*float64(time.Second))))
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

// gaugePump is the pump that carries the turns' events to the gauges
// (made at first use; it keeps the meter between turns).
func (v *chatView) gaugePump() *bridge.Pump {
	if v.pump == nil {
		v.pump = bridge.NewPump(v.u.do)
		v.pump.OnGauges = v.Gauges.Set
	}
	return v.pump
}

// hold takes title's history lock (dropping the one held before), so no
// other k3 writes it while it is open here; it returns the notice to show
// when another k3 has it.
func (v *chatView) hold(title string) string {
	v.release()
	l, err := v.Store.Hold(title)
	if err != nil {
		if errors.Is(err, chat.ErrHistoryInUse) {
			return "This conversation is open in another k3 too: what you write here is saved beside it, as a copy, so nothing is lost."
		}
		return bridge.Explain(err)
	}
	v.lock = l
	return ""
}

// release drops the history lock held.
func (v *chatView) release() {
	v.lock.Release()
	v.lock = nil
}

// rebuild shows the messages from index i on again.
func (v *chatView) rebuild(i int) {
	v.Views = v.Views[:min(i, len(v.Views))]
	v.Msgs.Objects = v.Msgs.Objects[:min(i, len(v.Msgs.Objects))]
	for j := len(v.Views); j < len(v.History); j++ {
		v.addView(v.History[j])
	}
	v.Msgs.Refresh()
}

// NewConversation starts an empty conversation (with the default system
// prompt, if one is set).
func (v *chatView) NewConversation() {
	if v.Busy {
		v.Notice.SetText("A reply is being written: wait for it (or press Stop), then start a new conversation.")
		return
	}
	t, err := v.Store.New(chat.AutoTitlePrefix + time.Now().Format("2006-01-02 15.04"))
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
		return
	}
	if sys := strings.TrimSpace(v.u.S.SystemPrompt); sys != "" {
		if err := v.Store.Save(t, []chat.Message{{Role: "system", Content: sys}}); err != nil {
			v.Notice.SetText(bridge.Explain(err))
		}
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
	t, err := v.Store.Rename(from, to)
	var re *chat.RenamedError
	if err != nil && !errors.As(err, &re) {
		return err
	}
	if v.Title == from {
		v.Title = t
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
	if err := v.Store.Delete(title); err != nil {
		return err
	}
	if v.Title == title {
		v.release() // dropped with the file
		v.Title, v.History = "", nil
	}
	v.reload("")
	if v.Title == "" {
		v.NewConversation()
	}
	return nil
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

func (v *chatView) save() {
	err := v.Store.Save(v.Title, v.History)
	var ce *chat.ConflictError
	if errors.As(err, &ce) {
		// another k3 wrote the file: this conversation went beside it and
		// continues there
		v.Title = strings.TrimSuffix(filepath.Base(ce.SavedAs), chat.Ext)
		v.hold(v.Title)
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
	if v.Title == "" {
		return
	}
	if err := v.Store.SaveOptions(v.Title, v.Opts); err != nil {
		v.Notice.SetText("The conversation's settings could not be saved: " + bridge.Explain(err))
	}
}

// SystemPrompt is the current conversation's system prompt ("" for none).
func (v *chatView) SystemPrompt() string {
	if len(v.History) > 0 && v.History[0].Role == "system" {
		return v.History[0].Content
	}
	return ""
}

// SetSystemPrompt puts sys at the head of the current conversation (or
// removes the system prompt when empty). The next reply reads the whole
// conversation again.
func (v *chatView) SetSystemPrompt(sys string) {
	if v.Busy {
		return
	}
	sys = strings.TrimSpace(sys)
	has := len(v.History) > 0 && v.History[0].Role == "system"
	switch {
	case has && sys == "":
		v.History = v.History[1:]
	case has:
		v.History[0].Content = sys
	case sys != "":
		v.History = append([]chat.Message{{Role: "system", Content: sys}}, v.History...)
	default:
		return
	}
	v.save()
	v.rebuild(0)
	v.refreshButtons()
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

// SendEntry sends what is in the message box.
func (v *chatView) SendEntry() {
	text := strings.TrimSpace(v.Entry.Text)
	if text == "" || v.Busy {
		return
	}
	v.Entry.SetText("")
	v.Send(text)
}

// Send adds a user message and starts the reply. A conversation still
// called by its date takes its title from the first message; so does one
// whose first message is edited and sent again while its title is still
// the one made from that message (a title the user gave stays).
func (v *chatView) Send(text string) {
	if v.Busy {
		return
	}
	if !slices.ContainsFunc(v.History, func(m chat.Message) bool { return m.Role == "user" }) {
		auto := strings.HasPrefix(v.Title, chat.AutoTitlePrefix) ||
			v.Editing() && chat.IsAutoTitle(v.Title, v.fork.Replaced().Content)
		if auto && !chat.IsAutoTitle(v.Title, text) {
			if t, err := v.Store.Rename(v.Title, v.freeTitle(chat.TitleFrom(text))); err == nil || errors.As(err, new(*chat.RenamedError)) {
				v.Title = t
				v.u.N.LastConversation.Set(t)
				v.reload(t)
			}
		}
	}
	v.History = append(v.History, chat.Message{Role: "user", Content: text})
	if v.Editing() {
		v.History = v.fork.Attach(v.History) // the edited message is a new version there
		v.fork = nil
		v.endEdit()
	}
	v.addView(v.History[len(v.History)-1])
	v.save()
	v.startTurn(v.Opts)
}

// freeTitle is want, or want 2, 3, ... when a conversation has that title.
func (v *chatView) freeTitle(want string) string {
	titles, _ := v.Store.List()
	t := want
	for i := 2; slices.Contains(titles, t); i++ {
		t = fmt.Sprintf("%s %d", want, i)
	}
	return t
}

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
		v.History, v.fork = bridge.NewFork(v.History, n-1)
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
	shown, n := bridge.VersionsAt(v.History, i)
	if k := shown + delta; k >= 0 && k < n {
		v.History = bridge.ShowVersion(v.History, i, k)
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
	text := v.History[i].Content
	v.History, v.fork = bridge.NewFork(v.History, i)
	v.truncateViews(i)
	v.Editing() = true
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
	i := v.fork.At
	v.History = v.fork.Restore(v.History)
	v.endEdit()
	v.Entry.SetText("")
	v.rebuild(i)
	v.refreshButtons()
}

// endEdit leaves editing (Open and Send; CancelEdit brings the old text back first).
func (v *chatView) endEdit() {
	if v.Editing() {
		v.fork = nil
	}
	v.Editing() = false
	v.CancelBt.Hide()
}

// truncateViews drops the views from message n on.
func (v *chatView) truncateViews(n int) {
	v.Views = v.Views[:n]
	v.Msgs.Objects = v.Msgs.Objects[:n]
	v.Msgs.Refresh()
}

// Stop ends the reply in flight; the partial reply is kept.
func (v *chatView) Stop() {
	if v.Busy && v.cancel != nil && !v.stopping {
		v.stopping = true
		v.Phase.SetText("stopping — what was written so far is kept")
		v.cancel()
	}
}

// Idle returns a channel closed when no turn is running (tests wait on it).
func (v *chatView) Idle() <-chan struct{} { return v.idle }

// startTurn runs a reply to the conversation (with v.fork set, the reply
// is a new version at the fork).
func (v *chatView) startTurn(opt chat.Options) {
	u := v.u
	if v.engine == nil {
		if u.B.NewChat == nil {
			v.Notice.SetText("No engine is available.")
			return
		}
		e, err := u.B.NewChat(u.S)
		if err != nil {
			v.Notice.SetText(bridge.Explain(err))
			return
		}
		v.engine = e
	}
	ctx, cancel := context.WithCancel(context.Background())
	v.Busy, v.cancel = true, cancel
	v.idle = make(chan struct{})
	idle := v.idle
	v.Notice.SetText("")
	v.refreshButtons()
	reply := v.addView(chat.Message{Role: "assistant"})
	v.reply = reply
	start := time.Now()
	reply.StartStream(start)
	v.scrollToEnd()

	p := v.gaugePump()
	p.OnText = func(r, a string) {
		follow := v.following()
		reply.Append(r, a)
		if follow {
			v.scrollToEnd()
		}
	}
	p.OnPhase = func(ph string) {
		if !v.stopping { // progress that was on its way must not hide "stopping"
			v.Phase.SetText(ph)
		}
	}
	p.WithMeter(func(m *bridge.Meter) { m.StartTurn(start) })
	p.Start()
	history := append([]chat.Message(nil), v.History...)
	eng := v.engine
	needInfo := v.Info == nil
	go func() {
		var rep bridge.Reply
		info, err := eng.Open(ctx, p.Event)
		if err == nil && needInfo {
			avail := int64(0)
			if u.B.Planner != nil {
				if mem, merr := u.B.Planner.Memory(); merr == nil {
					avail = mem.Usable()
				}
			}
			p.WithMeter(func(m *bridge.Meter) { m.SetLimits(info.BudgetBytes, avail) })
			u.do(func() {
				v.Info = &info
				v.Gauges.SetModel(info)
				v.Picker.Refresh()
			})
		}
		if err == nil {
			rep, err = eng.Turn(ctx, history, opt, p.Event)
		}
		p.WithMeter(func(m *bridge.Meter) { m.EndTurn() })
		p.Stop()
		u.do(func() {
			v.finishTurn(reply, rep, err)
			close(idle)
		})
	}()
}

func (v *chatView) finishTurn(reply *messageView, rep bridge.Reply, err error) {
	v.Busy, v.cancel, v.stopping, v.reply = false, nil, false, nil
	v.Notice.SetText("") // "wait for the reply…" notices are out of date now
	fork := v.fork
	v.fork = nil
	if v.quitting {
		return // saved when the window closed
	}
	msg := rep.Message
	if err != nil && msg.Content == "" && msg.ReasoningContent == "" {
		// nothing to keep: drop the empty reply (a regenerated one brings
		// back the reply it was to replace); Retry tries again
		v.Views = v.Views[:len(v.Views)-1]
		v.Msgs.Remove(reply.Root)
		if fork != nil {
			v.History = fork.Restore(v.History)
			v.rebuild(fork.At)
		}
		v.Notice.SetText(bridge.Explain(err))
		v.Phase.SetText("")
		v.refreshButtons()
		return
	}
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
		if msg.Cut == "" {
			msg.Cut = chat.CutStopped
		}
	}
	msg.Role = "assistant"
	msg.Stats = v.replyStats(reply)
	if st := msg.Stats; st != nil && st.SecondsPerToken > 0 {
		v.machineSpt = st.SecondsPerToken
	}
	reply.SetFinal(msg)
	v.History = append(v.History, msg)
	if fork != nil {
		v.History = fork.Attach(v.History)
		reply.SetVersions(bridge.VersionsAt(v.History, fork.At))
	}
	v.save()
	v.noteContext(rep.Positions)
	switch {
	case msg.Cut == chat.CutStopped:
		v.Phase.SetText("stopped — the partial reply is kept")
	case msg.Cut == chat.CutTurnCap:
		v.Phase.SetText("the reply reached its length limit")
	default:
		v.Phase.SetText("done")
	}
	v.refreshButtons()
	v.scrollToEnd()
	v.Focus()
}

// replyStats are the numbers of the reply just written, from the gauges
// (nil when no token came).
func (v *chatView) replyStats(reply *messageView) *chat.ReplyStats {
	g := v.Gauges.G
	if g.Tokens == 0 {
		return nil
	}
	st := &chat.ReplyStats{Tokens: g.Tokens, FirstTokenSeconds: g.TTFT}
	if g.Tokens > 1 {
		st.SecondsPerToken = (g.SecPerToken*float64(g.Tokens) - g.FirstStep) / float64(g.Tokens-1)
	}
	if !reply.thinkEnd.IsZero() {
		st.ThoughtSeconds = reply.thinkEnd.Sub(reply.started).Seconds()
	}
	return st
}

// SavePartial keeps what the reply in flight wrote so far (marked stopped)
// and stops it: for closing the app during a reply.
func (v *chatView) SavePartial() {
	if !v.Busy || v.reply == nil || v.quitting {
		return
	}
	v.quitting = true
	v.History = append(v.History, chat.Message{Role: "assistant", Content: v.reply.Answer,
		ReasoningContent: v.reply.Reasoning, Cut: chat.CutStopped, Stats: v.replyStats(v.reply)})
	if v.fork != nil {
		v.History = v.fork.Attach(v.History)
	}
	v.save()
	if v.cancel != nil {
		v.cancel()
	}
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

// ResetEngine releases the engine once the turn in flight (if any) ended,
// so the next message opens the model the settings name now.
func (v *chatView) ResetEngine() {
	v.Stop()
	e := v.engine
	v.engine, v.Info = nil, nil
	v.Gauges.SetModel(bridge.ModelInfo{})
	v.modelClosed()
	if v.Picker != nil {
		v.Picker.Refresh()
	}
	if e != nil {
		idle := v.idle
		go func() {
			<-idle
			e.Close()
		}()
	}
}

// Shutdown stops any turn, releases the engine and the history lock.
func (v *chatView) Shutdown() {
	if v.cancel != nil {
		v.cancel()
	}
	v.release()
	e := v.engine
	v.engine = nil
	if e != nil {
		go func() {
			<-v.idle
			e.Close()
		}()
	}
}
