package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
	"k3/tokenizer"
)

// ChatView is the main view: conversations on the left, the conversation
// in the middle, the engine gauges on the right.
type ChatView struct {
	u    *UI
	Root fyne.CanvasObject

	store   Conversations
	Convs   *ConversationsView
	Current string
	History []chat.Message

	Msgs     *fyne.Container
	scroller *container.Scroll
	Views    []*MessageView

	Entry    *chatEntry
	SendBt   *widget.Button
	StopBt   *widget.Button
	RegenBt  *widget.Button
	EditBt   *widget.Button
	Thinking *widget.Check
	Effort   *widget.Select
	Phase    *widget.Label
	Notice   *widget.Label
	Gauges   *GaugesView

	engine  ChatEngine
	Info    *ModelInfo
	Busy    bool
	cancel  context.CancelFunc
	pump    *Pump
	idle    chan struct{} // closed when no turn runs
	opening bool
}

// NewChatView builds the chat and opens the last conversation.
func NewChatView(u *UI) *ChatView {
	v := &ChatView{u: u, store: Conversations{Dir: u.conversationsDir()}, idle: make(chan struct{})}
	close(v.idle)
	v.Convs = NewConversationsView(u.Win)
	v.Convs.OnSelect = v.Open
	v.Convs.OnNew = v.NewConversation
	v.Convs.OnRename = func(from, to string) {
		if err := v.Rename(from, to); err != nil {
			v.Notice.SetText(err.Error())
		}
	}
	v.Convs.OnDelete = func(t string) {
		if err := v.Delete(t); err != nil {
			v.Notice.SetText(Explain(err))
		}
	}

	v.Msgs = container.NewVBox()
	v.scroller = container.NewVScroll(v.Msgs)
	v.Entry = newChatEntry()
	v.Entry.SetMinRowsVisible(3)
	v.Entry.OnSend = v.SendEntry
	v.Entry.OnStop = v.Stop
	v.SendBt = widget.NewButtonWithIcon("Send", theme.MailSendIcon(), v.SendEntry)
	v.SendBt.Importance = widget.HighImportance
	v.StopBt = widget.NewButtonWithIcon("Stop", theme.MediaStopIcon(), v.Stop)
	v.StopBt.Disable()
	v.RegenBt = widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), v.Regenerate)
	v.EditBt = widget.NewButtonWithIcon("Edit last", theme.DocumentCreateIcon(), v.EditLast)
	v.Thinking = widget.NewCheck("Thinking", nil)
	v.Thinking.SetChecked(u.S.Thinking)
	v.Effort = widget.NewSelect(tokenizer.ThinkingEfforts, nil)
	v.Effort.SetSelected(u.S.Effort)
	v.Thinking.OnChanged = func(b bool) { u.S.Thinking = b; u.SaveSettings(); v.refreshButtons() }
	v.Effort.OnChanged = func(s string) { u.S.Effort = s; u.SaveSettings() }
	settingsBt := widget.NewButtonWithIcon("Sampling…", theme.SettingsIcon(), v.showChatSettings)
	v.Phase = widget.NewLabel("")
	v.Phase.Truncation = fyne.TextTruncateEllipsis
	v.Notice = wrapLabel("")
	v.Notice.Importance = widget.WarningImportance
	v.Gauges = NewGaugesView()

	tools := container.NewHBox(v.Thinking, widget.NewLabel("effort"), v.Effort, settingsBt, v.RegenBt, v.EditBt)
	inputRow := container.NewBorder(nil, nil, nil, container.NewVBox(v.SendBt, v.StopBt), v.Entry)
	bottom := container.NewVBox(v.Notice, v.Phase, tools, inputRow)
	center := container.NewBorder(nil, bottom, nil, nil, v.scroller)
	right := container.NewVScroll(container.NewPadded(v.Gauges.Root))
	right.SetMinSize(fyne.NewSize(290, 0))
	left := container.NewPadded(v.Convs.Root)
	split := container.NewHSplit(left, container.NewBorder(nil, nil, nil, right, center))
	split.Offset = 0.17
	v.Root = split

	v.reload(u.S.LastConversation)
	if v.Current == "" {
		v.NewConversation()
	}
	u.Win.Canvas().SetOnTypedKey(func(k *fyne.KeyEvent) {
		if k.Name == fyne.KeyEscape {
			v.Stop()
		}
	})
	v.refreshButtons()
	return v
}

// Focus puts the cursor in the message box.
func (v *ChatView) Focus() { v.u.Win.Canvas().Focus(v.Entry) }

func (v *ChatView) reload(want string) {
	titles, err := v.store.List()
	if err != nil {
		v.Notice.SetText(Explain(err))
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
	if sel != "" && sel != v.Current {
		v.Open(sel)
	}
}

// Open shows a saved conversation.
func (v *ChatView) Open(title string) {
	if v.Busy || title == "" {
		return
	}
	h, err := v.store.Load(title)
	if err != nil {
		v.Notice.SetText(Explain(err))
		return
	}
	v.Current, v.History = title, h
	v.u.S.LastConversation = title
	v.u.SaveSettings()
	v.Views = nil
	v.Msgs.Objects = nil
	for _, m := range h {
		v.addView(m)
	}
	v.Msgs.Refresh()
	v.Notice.SetText("")
	v.refreshButtons()
}

// NewConversation starts an empty conversation.
func (v *ChatView) NewConversation() {
	if v.Busy {
		return
	}
	t, err := v.store.New("Conversation " + time.Now().Format("2006-01-02 15.04"))
	if err != nil {
		v.Notice.SetText(Explain(err))
		return
	}
	v.reload(t)
	v.Open(t)
}

// Rename renames a conversation.
func (v *ChatView) Rename(from, to string) error {
	if v.Busy {
		return fmt.Errorf("wait until the reply is finished (or press Stop) before renaming")
	}
	t, err := v.store.Rename(from, to)
	if err != nil {
		return err
	}
	if v.Current == from {
		v.Current = t
		v.u.S.LastConversation = t
		v.u.SaveSettings()
	}
	v.reload(v.Current)
	return nil
}

// Delete removes a conversation and opens another (or a new one).
func (v *ChatView) Delete(title string) error {
	if v.Busy {
		return fmt.Errorf("wait until the reply is finished (or press Stop) before deleting")
	}
	if err := v.store.Delete(title); err != nil {
		return err
	}
	if v.Current == title {
		v.Current = ""
	}
	v.reload("")
	if v.Current == "" {
		v.NewConversation()
	}
	return nil
}

func (v *ChatView) addView(m chat.Message) *MessageView {
	mv := NewMessageView(m, func(s string) { v.u.Win.Clipboard().SetContent(s) })
	v.Views = append(v.Views, mv)
	v.Msgs.Add(mv.Root)
	return mv
}

func (v *ChatView) save() {
	err := v.store.Save(v.Current, v.History)
	var ce *chat.ConflictError
	if errors.As(err, &ce) {
		// another k3 wrote the file: this conversation went beside it and
		// continues there
		v.Current = strings.TrimSuffix(filepath.Base(ce.SavedAs), Ext)
		v.u.S.LastConversation = v.Current
		v.u.SaveSettings()
		if titles, lerr := v.store.List(); lerr == nil {
			v.Convs.SetTitles(titles, v.Current)
		}
		v.Notice.SetText(fmt.Sprintf("Another k3 changed or holds this conversation's file, so it was saved as %q instead; nothing was lost.", v.Current))
		return
	}
	if err != nil {
		v.Notice.SetText("The conversation could not be saved: " + Explain(err))
	}
}

// applySystemPrompt puts the settings' system prompt at the head of the
// current conversation (or removes it when empty).
func (v *ChatView) applySystemPrompt() {
	if v.Busy {
		return
	}
	sys := strings.TrimSpace(v.u.S.SystemPrompt)
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
	v.Open(v.Current)
}

func (v *ChatView) refreshButtons() {
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
	set(v.RegenBt, !v.Busy && n > 0 && v.History[n-1].Role == "assistant")
	set(v.EditBt, !v.Busy && v.lastUser() >= 0)
	if v.Thinking.Checked {
		v.Effort.Enable()
	} else {
		v.Effort.Disable()
	}
}

func (v *ChatView) lastUser() int {
	for i := len(v.History) - 1; i >= 0; i-- {
		if v.History[i].Role == "user" {
			return i
		}
	}
	return -1
}

// SendEntry sends what is in the message box.
func (v *ChatView) SendEntry() {
	text := strings.TrimSpace(v.Entry.Text)
	if text == "" || v.Busy {
		return
	}
	v.Entry.SetText("")
	v.Send(text)
}

// Send adds a user message and starts the reply.
func (v *ChatView) Send(text string) {
	if v.Busy {
		return
	}
	if len(v.History) == 0 && strings.TrimSpace(v.u.S.SystemPrompt) != "" {
		sys := chat.Message{Role: "system", Content: strings.TrimSpace(v.u.S.SystemPrompt)}
		v.History = append(v.History, sys)
		v.addView(sys)
	}
	m := chat.Message{Role: "user", Content: text}
	v.History = append(v.History, m)
	v.addView(m)
	v.save()
	v.startTurn()
}

// Regenerate replaces the last reply with a new one.
func (v *ChatView) Regenerate() {
	n := len(v.History)
	if v.Busy || n == 0 || v.History[n-1].Role != "assistant" {
		return
	}
	v.truncate(n - 1)
	v.save()
	v.startTurn()
}

// EditLast takes the last user message back into the message box (and
// removes it and what followed) so it can be changed and sent again.
func (v *ChatView) EditLast() {
	i := v.lastUser()
	if v.Busy || i < 0 {
		return
	}
	text := v.History[i].Content
	v.truncate(i)
	v.save()
	v.Entry.SetText(text)
	v.Focus()
	v.refreshButtons()
}

func (v *ChatView) truncate(n int) {
	v.History = v.History[:n]
	v.Views = v.Views[:n]
	v.Msgs.Objects = v.Msgs.Objects[:n]
	v.Msgs.Refresh()
}

// Stop ends the reply in flight; the partial reply is kept.
func (v *ChatView) Stop() {
	if v.Busy && v.cancel != nil {
		v.Phase.SetText("stopping after the step in flight…")
		v.cancel()
	}
}

// Idle returns a channel closed when no turn is running (tests wait on it).
func (v *ChatView) Idle() <-chan struct{} { return v.idle }

func (v *ChatView) turnOptions() chat.Options { return v.u.S.ChatOptions() }

func (v *ChatView) startTurn() {
	u := v.u
	if v.engine == nil {
		if u.B.NewChat == nil {
			v.Notice.SetText("No engine is available.")
			return
		}
		e, err := u.B.NewChat(u.S)
		if err != nil {
			v.Notice.SetText(Explain(err))
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
	v.scroller.ScrollToBottom()

	if v.pump == nil {
		v.pump = NewPump(u.do)
		v.pump.OnGauges = v.Gauges.Set
	}
	p := v.pump
	p.OnText = func(r, a string) {
		reply.Append(r, a)
		v.scroller.ScrollToBottom()
	}
	p.OnPhase = func(ph string) { v.Phase.SetText(ph) }
	p.WithMeter(func(m *Meter) { m.StartTurn(time.Now()) })
	p.Start()
	history := append([]chat.Message(nil), v.History...)
	opt := v.turnOptions()
	eng := v.engine
	needInfo := v.Info == nil
	go func() {
		var msg chat.Message
		info, err := eng.Open(ctx, p.Event)
		if err == nil && needInfo {
			avail := int64(0)
			if u.B.Planner != nil {
				if mem, merr := u.B.Planner.Memory(); merr == nil {
					avail = mem.Usable()
				}
			}
			p.WithMeter(func(m *Meter) { m.SetLimits(info.BudgetBytes, avail) })
			u.do(func() {
				v.Info = &info
				v.Gauges.SetModel(info)
			})
		}
		if err == nil {
			msg, err = eng.Turn(ctx, history, opt, p.Event)
		}
		p.Stop()
		u.do(func() {
			v.finishTurn(reply, msg, err)
			close(idle)
		})
	}()
}

func (v *ChatView) finishTurn(reply *MessageView, msg chat.Message, err error) {
	v.Busy, v.cancel = false, nil
	if err != nil && msg.Content == "" && msg.ReasoningContent == "" {
		// nothing to keep: drop the empty reply
		v.Views = v.Views[:len(v.Views)-1]
		v.Msgs.Remove(reply.Root)
		v.Notice.SetText(Explain(err))
		v.Phase.SetText("")
		v.refreshButtons()
		return
	}
	if err != nil {
		v.Notice.SetText(Explain(err))
		if msg.Cut == "" {
			msg.Cut = chat.CutStopped
		}
	}
	msg.Role = "assistant"
	reply.SetFinal(msg)
	v.History = append(v.History, msg)
	v.save()
	g := v.Gauges.G
	switch {
	case msg.Cut == chat.CutStopped:
		v.Phase.SetText("stopped — the partial reply is kept")
	case g.Tokens > 0:
		v.Phase.SetText(fmt.Sprintf("done: %d tokens, first after %.2f s, %.2f s/token", g.Tokens, g.TTFT, g.SecPerToken))
	default:
		v.Phase.SetText("done")
	}
	v.refreshButtons()
	v.Focus()
}

// Shutdown stops any turn and releases the engine.
func (v *ChatView) Shutdown() {
	if v.cancel != nil {
		v.cancel()
	}
	e := v.engine
	v.engine = nil
	if e != nil {
		go func() {
			<-v.idle
			e.Close()
		}()
	}
}
