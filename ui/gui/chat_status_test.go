package gui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/bridge"
)

// statusChat is a fake chat engine that, like the app's own, measures
// what reading a prompt costs, counts tokens, switches its draft model
// between turns and says what the draft model does; its replies' numbers
// are its own count (a server's), not the stream's.
type statusChat struct {
	fakeChat
	draft     string
	draftOn   []bool
	tokens    int // the count its replies report
	opens     int
	passSec   float64
	passChunk int
}

func (f *statusChat) Open(ctx context.Context, on func(engine.Event)) (bridge.ModelInfo, error) {
	f.mu.Lock()
	f.opens++
	f.mu.Unlock()
	info, err := f.fakeChat.Open(ctx, on)
	info.Draft = f.draft
	return info, err
}

func (f *statusChat) Turn(ctx context.Context, h []chat.Message, opt chat.Options, on func(engine.Event)) (bridge.Reply, error) {
	r, err := f.fakeChat.Turn(ctx, h, opt, on)
	if r.Stats != nil && f.tokens > 0 {
		r.Stats.Tokens = f.tokens
	}
	return r, err
}

func (f *statusChat) SetDraft(on bool) { f.draftOn = append(f.draftOn, on) }

func (f *statusChat) PromptRate() (float64, int) { return f.passSec, f.passChunk }

func (f *statusChat) CountTokens(text string) (int, bool) { return len(strings.Fields(text)), true }

func startStatusUI(t *testing.T, fc *statusChat, draft bool) *chatView {
	t.Helper()
	u, _ := newTestUI(t, &fc.fakeChat)
	u.B.NewChat = func(bridge.Settings) (bridge.ChatEngine, error) { return fc, nil }
	u.S.ModelDir = modelFolder(t, t.TempDir(), "kimi-k3", draft)
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	require.NotNil(t, u.Chat)
	return u.Chat
}

// N2: from the moment Send is pressed the status line says what is
// happening (it was empty, then "ready", while the prompt was read).
func TestSendSaysWhatItDoesAtOnce(t *testing.T) {
	fc := &statusChat{fakeChat: fakeChat{gate: make(chan struct{})}}
	v := startStatusUI(t, fc, false)
	ui(func() {
		v.Send("hello")
		assert.True(t, v.Phase.Visible())
		assert.Equal(t, "starting the reply", v.Phase.Text)
	})
	waitFor(t, "the engine's phase", func() bool { return v.Phase.Text == "answering" })
	close(fc.gate)
	waitFor(t, "reply", func() bool { return !v.Busy })
}

// N2: before sending, the box under the message says what the reply will
// cost: a pasted 5,000-word text says its length (and, at the measured
// pass time, what reading it takes) before it is sent.
func TestPastedTextSaysItsCostBeforeSending(t *testing.T) {
	fc := &statusChat{passSec: 3, passChunk: 128}
	v := startStatusUI(t, fc, false)
	v.u.later = func(_ time.Duration, f func()) { f() } // the exact count once typing pauses: at once here
	long := strings.Repeat("word ", 5000)
	ui(func() {
		v.Entry.SetText(long)
		require.True(t, v.Estimate.Visible(), "a long message says nothing before it is sent")
		assert.Equal(t, "Your message is about 6,667 tokens long.", v.Estimate.Text, "before the model is loaded: estimated from its words")
		v.Entry.SetText("hello")
		assert.False(t, v.Estimate.Visible())
		v.Send("hello")
	})
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		v.Entry.SetText(long)
		// now counted by the engine (a word a token here), and read in
		// 40 passes of 3 s
		assert.Equal(t, "Your message is 5,000 tokens long: reading it takes about 2 min (40 passes).", v.Estimate.Text)
	})
}

// N1: the draft box says what drafting does on this model and preset;
// unticking it keeps the model loaded (the engine switches it between
// turns); while it drafts, its tokens per pass.
func TestDraftBoxSaysWhatItDoes(t *testing.T) {
	fc := &statusChat{draft: bridge.DraftNotFaster}
	v := startStatusUI(t, fc, true)
	p := v.Picker
	ui(func() {
		assert.Contains(t, p.DraftNote.Text, "it loads with the model")
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "Draft model not used: this model is small enough that drafting would not be faster", p.DraftNote.Text)
		eng := v.engine
		p.Draft.SetChecked(false)
		assert.Same(t, eng, v.engine, "unticking let the model go")
		assert.NotNil(t, v.Info, "unticking unloaded the model")
		assert.Equal(t, []bool{false}, fc.draftOn)
		assert.True(t, v.u.S.NoDraft)
		assert.Equal(t, "Draft model off: every token takes one pass (same answer)", p.DraftNote.Text)
		p.Draft.SetChecked(true)
		assert.Equal(t, []bool{false, true}, fc.draftOn)
		// a reply that drafted: 11 tokens in 4 passes after the first
		v.Gauges.Set(bridge.Gauges{Tokens: 11, Drafted: 8, Accepted: 6})
		p.Refresh()
		assert.Equal(t, "Draft model in use: 2.50 tokens per pass in the last reply (same answer)", p.DraftNote.Text)
	})
	assert.Equal(t, 1, fc.opens)
}

// N7: the numbers under a reply and the Engine panel's are one count: the
// chat engine's (a server's usage), with the first token timed from Send.
func TestReplyAndPanelShowOneCount(t *testing.T) {
	fc := &statusChat{tokens: 50}
	v := startStatusUI(t, fc, false)
	ui(func() { v.Send("hi") })
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		st := v.History[len(v.History)-1].Stats
		require.NotNil(t, st)
		assert.Equal(t, 50, st.Tokens)
		assert.Contains(t, v.Gauges.Speed.Text, "50 tokens")
		assert.Contains(t, v.Gauges.Speed.Text, "2.0 tokens/s")
		assert.InDelta(t, v.Gauges.G.TTFT, st.FirstTokenSeconds, 1e-9, "the reply's first token is not the panel's")
		mv := v.Views[len(v.Views)-1]
		assert.Contains(t, mv.statsLbl.Text, "50 tokens")
	})
}
