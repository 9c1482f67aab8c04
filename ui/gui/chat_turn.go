package gui

import (
	"context"
	"errors"
	"strings"
	"time"

	"fyne.io/fyne/v2"

	"k3/engine/chat"
	"k3/ui/bridge"
)

// The chat view's turns: sending, the reply streaming in, Stop, and
// the chat engine behind them.

// showEstimate shows, before sending, what the reply will cost (N2): on
// a slow machine the first token and each 100 tokens at the speed this
// machine measured on the last reply (this turn's, else the
// conversation's last saved one; before any, the speed the doctor
// predicted for the preset), and for a long message its length and the
// time reading it takes at the measured time of a pass.
func (v *chatView) showEstimate() { v.estimate(true) }

// estimate shows the estimate, the message's length counted with the
// model's tokenizer when exact, else from its words (while typing: each
// key would count the whole text again).
func (v *chatView) estimate(exact bool) {
	if v.Busy {
		setNote(v.Estimate, "")
		return
	}
	setNote(v.Estimate, bridge.ReplyCost(v.replyCost(), v.promptSize(v.Entry.Text, exact), v.Opts.MaxTokens))
}

// typed follows the message box: the estimate from the words at once, the
// exact count once typing pauses.
func (v *chatView) typed() {
	v.estimate(false)
	v.typedGen++
	gen := v.typedGen
	v.u.later(400*time.Millisecond, func() {
		if gen == v.typedGen {
			v.estimate(true)
		}
	})
}

// replyCost is the cost of a reply as measured (or predicted).
func (v *chatView) replyCost() bridge.Cost {
	g := v.Gauges.G
	c := bridge.Cost{SecPerToken: g.SecPerToken, FirstToken: g.TTFT}
	if s := g.Saved; s != nil && s.Tokens > 0 {
		c.SecPerToken, c.FirstToken = s.SecondsPerToken, s.FirstTokenSeconds
	}
	if pm, ok := v.engine.(bridge.PromptMeter); ok {
		c.PassSeconds, c.Chunk = pm.PromptRate()
	}
	if r := v.u.machine; c.SecPerToken <= 0 && r != nil && r.Preset.Name == v.u.S.Preset && (v.Info == nil || !v.Info.Demo && !v.Info.Remote) &&
		v.u.S.Backend != bridge.BackendServer && !v.u.S.Demo {
		c.SecPerToken, c.Predicted = r.Preset.PredictedSecondsPerToken, true
	}
	return c
}

// promptSize is the length of text about to be sent: counted with the
// model's tokenizer once it is loaded, else estimated from its words.
func (v *chatView) promptSize(text string, exact bool) bridge.Prompt {
	p := bridge.Prompt{Tokens: bridge.ApproxTokens(text)}
	if v.Info != nil {
		p.Context = v.Info.Context
		fma := 0.0
		if v.u.machine != nil {
			fma = v.u.machine.Compute.FMAGFlops
		}
		p.Pictures = bridge.PicturesCost(v.Info.Vision, v.Pictures, fma)
	}
	if pm, ok := v.engine.(bridge.PromptMeter); ok && exact && len(text) < 1<<20 {
		if n, ok := pm.CountTokens(text); ok {
			p.Tokens, p.Exact = n, true
		}
	}
	return p
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
	if v.Conversation.TitleFrom(text) {
		v.u.N.LastConversation.Set(v.Title)
		v.reload(v.Title)
	}
	editing := v.Editing()
	v.AddUser(text) // an edited message is a new version where the edit started
	v.showPending() // the pictures went with it
	if editing {
		v.endEdit()
	}
	v.addView(v.History[len(v.History)-1])
	v.save()
	v.startTurn(v.Opts)
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

// startTurn runs a reply to the conversation (after Regenerate the reply
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
	// never an empty or "ready" status while the turn works (N2): the
	// engine's phases replace this within a moment; from the moment Send
	// is pressed it says when it waits for the server's request (G13)
	v.Phase.SetText(v.waitingPhase())
	v.statusLine.SetMinSize(fyne.NewSize(0, v.Phase.MinSize().Height))
	v.statusHeld = true
	v.syncStatus()
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
			v.opened(info)
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
	if v.u.S.Backend == bridge.BackendServer {
		if v.serverDown == nil {
			v.serverDown = map[string]bool{}
		}
		v.serverDown[v.u.S.ServerURL] = err != nil && rep.Content == "" && rep.ReasoningContent == "" && !errors.Is(err, context.Canceled)
		v.Picker.Refresh()
		if v.Info == nil {
			v.Gauges.SetModel(v.idleModel())
		}
	}
	v.Notice.SetText("") // "wait for the reply…" notices are out of date now
	logDetails("the reply", err)
	if v.quitting {
		return // saved when the window closed
	}
	msg := rep.Message
	if err != nil && msg.Content == "" && msg.ReasoningContent == "" {
		// nothing to keep: drop the empty reply (a regenerated one brings
		// back the reply it was to replace); Retry tries again
		v.Views = v.Views[:len(v.Views)-1]
		v.Msgs.Remove(reply.Root)
		if at := v.DropReply(); at >= 0 {
			v.rebuild(at)
		}
		v.Notice.SetText(bridge.Explain(err))
		v.Phase.SetText(v.servedPh) // a request of the server's may hold the engine now
		v.refreshButtons()
		return
	}
	if err != nil {
		v.Notice.SetText(bridge.Explain(err))
		if msg.Cut == "" {
			msg.Cut = chat.CutStopped
		}
	}
	msg.Role = "assistant" // msg.Stats: the numbers the chat engine measured
	v.oneCount(msg.Stats)
	if st := msg.Stats; st != nil && st.SecondsPerToken > 0 {
		v.machineSpt = st.SecondsPerToken
	}
	reply.SetFinal(msg)
	if at := v.AddReply(msg); at >= 0 {
		reply.SetVersions(v.Versions(at))
	}
	v.save()
	v.noteContext(rep.Positions)
	// the reply says how it ended (its numbers, or why it was cut): the
	// phase line says nothing more and gives its room back, unless a
	// request of the server's took the engine as the turn ended
	v.Phase.SetText(v.servedPh)
	v.refreshButtons()
	v.Picker.Refresh() // the draft model's tokens per pass
	v.scrollToEnd()
	v.Focus()
}

// oneCount makes the reply's numbers and the Engine panel's the same (N7:
// "50 tokens" under a reply beside "23 tokens" in the panel): the tokens
// and speed the chat engine measured (a server's own count), the first
// token from Send as the panel timed it; the panel then shows them.
func (v *chatView) oneCount(st *chat.ReplyStats) {
	if st == nil {
		return
	}
	if ttft := v.Gauges.G.TTFT; ttft > 0 && v.Gauges.G.Served == 0 { // not a server's request's
		st.FirstTokenSeconds = ttft
	}
	var g bridge.Gauges
	v.gaugePump().WithMeter(func(m *bridge.Meter) {
		m.ShowReply(st)
		g = m.Gauges()
	})
	v.Gauges.Set(g)
}

// partialStats are the numbers of the reply still being written, from the
// gauges (nil when no token came): a reply saved as the app closes has no
// Reply from its chat engine yet.
func (v *chatView) partialStats(reply *messageView) *chat.ReplyStats {
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
	v.AddReply(chat.Message{Role: "assistant", Content: v.reply.Answer,
		ReasoningContent: v.reply.Reasoning, Cut: chat.CutStopped, Stats: v.partialStats(v.reply)})
	v.save()
	if v.cancel != nil {
		v.cancel()
	}
}

// opened shows the model the chat engine opened (from a background
// goroutine: a turn's, or the server's start): its name in the Engine
// panel, its plan and the memory usable beside the meter's numbers.
func (v *chatView) opened(info bridge.ModelInfo) {
	u := v.u
	avail := int64(0)
	if u.B.Planner != nil {
		if mem, err := u.B.Planner.Memory(); err == nil {
			avail = mem.Usable()
		}
	}
	v.gaugePump().WithMeter(func(m *bridge.Meter) { m.SetLimits(info.BudgetBytes, avail) })
	u.do(func() {
		v.Info = &info
		v.Gauges.SetModel(info)
		v.showMeter()
		v.Picker.Refresh()
	})
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

// ResetEngine releases the engine once the turn in flight (if any) ended,
// so the next message opens the model the settings name now.
func (v *chatView) ResetEngine() {
	v.Stop()
	e := v.engine
	v.engine, v.Info = nil, nil
	v.Gauges.SetModel(v.idleModel())
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
func (v *chatView) Shutdown() <-chan struct{} {
	if v.cancel != nil {
		v.cancel()
	}
	v.Conversation.Release()
	e := v.engine
	v.engine = nil
	closed := make(chan struct{})
	if e == nil {
		close(closed)
		return closed
	}
	go func() {
		<-v.idle
		e.Close()
		close(closed)
	}()
	return closed
}
