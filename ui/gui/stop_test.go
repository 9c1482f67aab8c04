package gui

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/bridge"
)

// smallModel writes a generated checkpoint (K3 graph, random weights) and a
// byte-level tokenizer: one byte is one token, so a long message is a
// prompt of many prefill chunks.
func smallModel(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, writeSmallModel(dir))
	return dir
}

func realChatSettings(dir string) bridge.Settings {
	s := bridge.DefaultSettings()
	s.ModelDir, s.Preset = dir, "laptop"
	return s
}

// longPrompt is several prefill chunks (engine.DefaultChunk positions each).
var longPrompt = strings.Repeat("Tell me about the weather in the mountains. ", 12)

// Cancelling during prefill ends the turn before any token: the real
// engine checks the context before every layer, prompt included.
func TestEngineChatStopDuringPrefill(t *testing.T) {
	c := bridge.NewEngineChat(realChatSettings(smallModel(t)))
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var prefills, tokens int
	var lastTotal int
	msg, err := c.Turn(ctx, []chat.Message{{Role: "user", Content: longPrompt}}, realChatSettings("").ChatOptions(), func(ev engine.Event) {
		switch ev.Kind {
		case engine.EventPrefill:
			prefills++
			lastTotal = ev.Total
			if prefills == 1 {
				require.Less(t, ev.Done, ev.Total, "the first prefill event must come before the prompt is read")
				cancel()
			}
		case engine.EventToken:
			tokens++
		}
	})
	require.NoError(t, err, "a stopped turn is not an error")
	assert.Equal(t, 1, prefills, "no chunk may run after the cancel")
	assert.Greater(t, lastTotal, 2*engine.DefaultChunk)
	assert.Zero(t, tokens, "no token after a stop during prefill")
	assert.Equal(t, chat.CutStopped, msg.Cut)
	assert.Equal(t, "", msg.Content+msg.ReasoningContent)
}

// stopOnPrefill presses the view's Stop button the first time the engine
// reports prefill progress, from the engine's goroutine as a user's click
// would arrive while the prompt is read.
type stopOnPrefill struct {
	bridge.ChatEngine
	press func()
	once  sync.Once
	after []engine.EventKind
	mu    sync.Mutex
}

func (s *stopOnPrefill) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	pressed := false
	return s.ChatEngine.Turn(ctx, h, opt, func(ev engine.Event) {
		on(ev)
		if pressed {
			s.mu.Lock()
			s.after = append(s.after, ev.Kind)
			s.mu.Unlock()
		}
		if ev.Kind == engine.EventPrefill {
			s.once.Do(func() { pressed = true; s.press() })
		}
	})
}

// The view's Stop works while Busy during "reading prompt": the turn ends
// before any token, the empty reply is kept marked stopped, and the labels
// say what happened.
func TestChatStopDuringPrefillRealEngine(t *testing.T) {
	dir := smallModel(t)
	u, _ := newTestUI(t, nil)
	u.S = realChatSettings(dir)
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	var v *chatView
	sp := &stopOnPrefill{}
	sp.press = func() {
		ui(func() {
			require.True(t, v.Busy)
			require.False(t, v.StopBt.Disabled(), "Stop must be enabled while the prompt is read")
			test.Tap(v.StopBt)
			assert.True(t, strings.HasPrefix(v.Phase.Text, "stopping"), "phase %q", v.Phase.Text)
		})
	}
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		sp.ChatEngine = bridge.NewEngineChat(s)
		return sp, nil
	}
	ui(u.Start)
	v = u.Chat
	ui(func() { v.Send(longPrompt) })
	waitFor(t, "the stopped turn", func() bool { return !v.Busy })
	ui(func() {
		require.Len(t, v.History, 2)
		last := v.History[1]
		assert.Equal(t, "assistant", last.Role)
		assert.Equal(t, chat.CutStopped, last.Cut)
		assert.Equal(t, "", last.Content+last.ReasoningContent)
		assert.NotContains(t, sp.after, engine.EventToken, "no token after Stop")
		assert.Equal(t, "", v.Phase.Text, "the reply says it was stopped")
		assert.False(t, v.Views[1].cutLbl.Hidden)
		v.Shutdown()
	})
	h, err := chat.LoadHistory(u.conversationsDir() + "/" + v.Title + chat.Ext)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, chat.CutStopped, h[1].Cut)
}

// thinkUntilStopped streams a long thinking text, then waits for Stop and
// ends the turn stopped, with no answer.
type thinkUntilStopped struct {
	fakeChat
	thinking chan struct{} // closed once the thinking is sent
}

func (f *thinkUntilStopped) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	think := strings.Repeat("I should weigh the question from several sides before I answer it. ", 30)
	on(engine.Event{Kind: engine.EventPhase, Text: "thinking"})
	words := strings.SplitAfter(think, ". ")
	for _, w := range words {
		on(engine.Event{Kind: engine.EventReasoning, Text: w})
		on(engine.Event{Kind: engine.EventToken, Seconds: 0.1})
	}
	close(f.thinking)
	<-ctx.Done()
	return bridge.Reply{Message: chat.Message{Role: "assistant", ReasoningContent: think, Cut: chat.CutStopped, Stats: fakeStats(len(words), 0.1, 0)}}, nil
}

// overlaps lists the messages whose parts are drawn over each other: a
// part laid out shorter than it needs, a part that starts above the end of
// the one before it, a message that starts above the end of the one before.
func overlaps(v *chatView) []string {
	var out []string
	var prevEnd float32
	for i, mv := range v.Views {
		r := mv.Root
		if r.Position().Y < prevEnd-0.5 {
			out = append(out, fmt.Sprintf("message %d starts at %.0f, above the end of message %d (%.0f)", i, r.Position().Y, i-1, prevEnd))
		}
		if r.Size().Height < r.MinSize().Height-0.5 {
			out = append(out, fmt.Sprintf("message %d is %.0f high but needs %.0f", i, r.Size().Height, r.MinSize().Height))
		}
		prevEnd = r.Position().Y + r.Size().Height
		var end float32
		for j, o := range r.Objects {
			if !o.Visible() {
				continue
			}
			if o.Position().Y < end-0.5 {
				out = append(out, fmt.Sprintf("message %d: part %d starts at %.0f, above the end of the part before (%.0f)", i, j, o.Position().Y, end))
			}
			if o.Size().Height < o.MinSize().Height-0.5 {
				out = append(out, fmt.Sprintf("message %d: part %d is %.0f high but needs %.0f", i, j, o.Size().Height, o.MinSize().Height))
			}
			end = o.Position().Y + o.Size().Height
		}
	}
	return out
}

// G1: after Stop during thinking, the reply's numbers and its "stopped"
// note are laid out under the thinking text, and the next messages under
// the reply.
func TestStopDuringThinkingLaysOutUnderTheThinking(t *testing.T) {
	fc := &thinkUntilStopped{thinking: make(chan struct{})}
	a := test.NewTempApp(t)
	u := newTestUIOn(t, a, nil)
	u.B.NewChat = func(bridge.Settings) (bridge.ChatEngine, error) { return fc, nil }
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 600))
		v.Send("Why is the sky blue?")
	})
	<-fc.thinking
	ui(v.Stop)
	waitFor(t, "the stop", func() bool { return !v.Busy })
	ui(func() {
		reply := v.Views[len(v.Views)-1]
		require.True(t, reply.cutLbl.Visible())
		assert.Equal(t, "(stopped — the partial reply is kept)", reply.cutLbl.Text)
		require.True(t, reply.statsLbl.Visible(), "the reply's numbers are shown")
		assert.True(t, reply.think.Visible())
		assert.Contains(t, reply.think.Items[0].Title, "Thought for")
		assert.Empty(t, overlaps(v))
		thinkEnd := reply.think.Position().Y + reply.think.Size().Height
		assert.GreaterOrEqual(t, reply.statsLbl.Position().Y, thinkEnd, "the numbers are drawn over the thinking")
	})
}
