package gui

import (
	"fmt"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/tokenizer/xtml"
	"k3/ui/bridge"
)

// G7, G16, G29: after New the cursor is in the message box; Delete during
// a reply says why before asking; Export is off on an empty conversation;
// G24: a stop before any text says so.
func TestChatNewDeleteExportAndEarlyStop(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.True(t, v.ExportBt.Disabled(), "Export on an empty conversation")
		u.Win.Canvas().Unfocus()
		test.Tap(v.Convs.NewBt)
		assert.Equal(t, v.Entry, u.Win.Canvas().Focused(), "the message box has no focus after New")
		v.Send("hello")
		require.True(t, v.Busy)
		v.Convs.Selected = v.Title
		test.Tap(v.Convs.DeleteBt)
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top)
		assert.NotNil(t, findLabelIn(top, "A reply is being written: wait for it (or press Stop), then delete."), "no reason given before asking")
		u.Win.Canvas().Overlays().Remove(top)
		v.Stop()
	})
	waitFor(t, "stop", func() bool { return !v.Busy })
	ui(func() {
		reply := v.Views[len(v.Views)-1]
		assert.Equal(t, "(stopped — the partial reply is kept)", reply.cutLbl.Text, "it thought before the stop")
		assert.False(t, v.ExportBt.Disabled())
	})
	mv := newMessageView(chat.Message{Role: "assistant", Cut: chat.CutStopped}, messageEnv{})
	assert.Equal(t, "(stopped before anything was written)", mv.cutLbl.Text)
}

// findLabelIn finds a label or rich text showing text under o.
func findLabelIn(o fyne.CanvasObject, text string) fyne.CanvasObject {
	var found fyne.CanvasObject
	var walk func(o fyne.CanvasObject)
	walk = func(o fyne.CanvasObject) {
		if found != nil || o == nil {
			return
		}
		switch t := o.(type) {
		case *widget.Label:
			if strings.Contains(t.Text, text) {
				found = t
			}
		case *widget.RichText:
			if strings.Contains(t.String(), text) {
				found = t
			}
		case *fyne.Container:
			for _, c := range t.Objects {
				walk(c)
			}
		case fyne.Widget:
			for _, c := range test.WidgetRenderer(t).Objects() {
				walk(c)
			}
		}
	}
	walk(o)
	return found
}

// Item 2: on a slow machine the chat says, before sending, how long the
// first token and 100 tokens take at the measured speed; the reply cap is
// always in view.
func TestChatShowsTheWaitToPlanWith(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.Equal(t, fmt.Sprintf("replies up to %d tokens", v.Opts.MaxTokens), v.CapLb.Text)
		assert.False(t, v.Estimate.Visible(), "an estimate before anything was measured")
		v.Gauges.Set(bridge.Gauges{Tokens: 20, SecPerToken: 36, TTFT: 120})
		v.refreshButtons()
		assert.True(t, v.Estimate.Visible())
		assert.Equal(t, bridge.Estimate(36, 120, v.Opts.MaxTokens), v.Estimate.Text)
		assert.Contains(t, v.Estimate.Text, "the first token after about 2 min, then about 1 h per 100 tokens")
		v.Gauges.Set(bridge.Gauges{Tokens: 20, SecPerToken: 0.1, TTFT: 1})
		v.refreshButtons()
		assert.False(t, v.Estimate.Visible(), "an estimate for a fast machine")
	})
}

// G8: Tab leaves the message box, Ctrl+N starts a conversation, Ctrl+F
// goes to the search, Esc closes a dialog open during a reply instead of
// stopping the reply.
func TestChatKeyboard(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		c := u.Win.Canvas()
		c.Focus(v.Entry)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyTab})
		assert.NotEqual(t, v.Entry, c.Focused(), "Tab stayed in the message box")
		assert.NotContains(t, v.Entry.Text, "\t")

		before := v.Title
		v.Entry.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyN, Modifier: fyne.KeyModifierShortcutDefault})
		assert.NotEqual(t, before, v.Title, "Ctrl+N did not start a conversation")
		assert.Equal(t, "", v.Entry.Text)
		v.Entry.TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault})
		assert.Equal(t, v.Convs.Query, c.Focused(), "Ctrl+F did not go to the search")

		v.Send("hello")
		require.True(t, v.Busy)
		v.showChatSettings()
		require.NotNil(t, c.Overlays().Top())
		c.Focus(v.Entry)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		assert.Nil(t, c.Overlays().Top(), "Esc did not close the dialog")
		assert.True(t, v.Busy, "Esc stopped the reply behind the dialog")
		assert.False(t, v.stopping)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
		assert.True(t, v.stopping, "Esc with no dialog stops")
	})
	waitFor(t, "stop", func() bool { return !v.Busy })
}

// G11: the sampling fields are off while greedy decoding is on. G21: a
// search with no match says so. G12: a server's model has no "0 layers".
// G22: nothing measured reads "—", not "0.00 B".
func TestChatGreedySearchAndEmptyNumbers(t *testing.T) {
	test.NewTempApp(t)
	o := bridge.DefaultSettings().ConvDefaults()
	o.Greedy = true
	f := newSettingsForm("", o)
	assert.True(t, f.Temperature.Disabled())
	assert.True(t, f.TopP.Disabled())
	f.Greedy.SetChecked(false)
	assert.False(t, f.Temperature.Disabled())
	assert.False(t, f.TopK.Disabled())

	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		assert.False(t, v.Convs.NoMatch.Visible())
		v.Convs.Query.SetText("zzzz")
		assert.Empty(t, v.Convs.Shown())
		assert.True(t, v.Convs.NoMatch.Visible(), "an empty search result does not say so")
		v.Convs.Query.SetText("")
		assert.False(t, v.Convs.NoMatch.Visible())

		v.Gauges.SetModel(bridge.ModelInfo{Name: "demo-model on 127.0.0.1:18430", Remote: true})
		assert.Equal(t, "demo-model on 127.0.0.1:18430", v.Gauges.Model.Text)
		v.Gauges.Set(bridge.Gauges{})
		assert.Equal(t, "in use — (peak —)\nplan —, available —", v.Gauges.MemText.Text)
	})
}

// G27: with greedy decoding on, Regenerate asks once; after a Yes the next
// Regenerates sample without the same dialog again.
func TestRegenerateAsksOnceUnderGreedy(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() { v.Send("Question one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		require.True(t, v.Opts.Greedy, "greedy is the default")
		test.Tap(v.RegenBt)
		tapDialog(t, u.Win, "Yes")
	})
	waitFor(t, "regenerate 1", func() bool { return !v.Busy })
	for i := 2; i <= 3; i++ {
		ui(func() {
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "no dialog before Regenerate %d", i)
			test.Tap(v.RegenBt)
			assert.Nil(t, u.Win.Canvas().Overlays().Top(), "Regenerate %d asks nothing", i)
		})
		waitFor(t, "regenerate", func() bool { return !v.Busy })
		ui(func() {
			assert.False(t, fc.lastOpt.Greedy, "regeneration %d samples", i)
			assert.NotZero(t, fc.lastOpt.Seed)
			assert.Equal(t, "Hello world, this is reply "+string(rune('1'+i)), v.History[len(v.History)-1].Content)
		})
	}
}

// Issue 27 item 2: on a slow machine a new conversation thinks at low
// effort and says why; on a fast one the default stays.
func TestSlowMachineDefaultsToLowEffort(t *testing.T) {
	for _, c := range []struct {
		spt  float64
		want string
	}{{4, "low"}, {0.2, xtml.DefaultThinkingEffort}} {
		fc := &fakeChat{}
		_, v := chatUI(t, fc)
		ui(func() {
			require.NoError(t, v.Store.Save("measured", []chat.Message{{Role: "user", Content: "Hi"},
				{Role: "assistant", Content: "Hello", Stats: &chat.ReplyStats{Tokens: 10, SecondsPerToken: c.spt}}}))
			v.reload("measured")
			require.Equal(t, "measured", v.Title)
			assert.Equal(t, xtml.DefaultThinkingEffort, v.Opts.Effort, "a conversation with replies keeps its effort")
			v.NewConversation()
			assert.Equal(t, c.want, v.Opts.Effort)
			assert.Equal(t, c.want, v.Effort.Selected)
			if c.want == "low" {
				assert.Contains(t, v.Notice.Text, "Thinking effort is set to low: this machine writes about 4.0 s per token")
			} else {
				assert.NotContains(t, v.Notice.Text, "Thinking effort")
			}
			v.Send("Question")
		})
		waitFor(t, "turn", func() bool { return !v.Busy })
		ui(func() { assert.Equal(t, c.want, fc.lastOpt.Effort) })
	}
}

// A blank band about one line high sat under the messages at 1024x640: the
// empty notice and phase lines kept their height. An empty line takes no
// room; one with words takes its line, and gives it back when emptied.
func TestEmptyNoticeAndPhaseTakeNoRoom(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	d := fyne.CurrentApp().Driver()
	gap := func() float32 {
		relayout(u.Win)
		end := d.AbsolutePositionForObject(v.scroller).Y + v.scroller.Size().Height
		return d.AbsolutePositionForObject(v.Thinking).Y - end
	}
	ui(func() {
		u.Win.Resize(fyne.NewSize(1024, 600))
		assert.Equal(t, "", v.Notice.Text)
		assert.Equal(t, "", v.Phase.Text)
		assert.False(t, v.Notice.Visible())
		assert.False(t, v.Phase.Visible())
		assert.False(t, v.Estimate.Visible())
		empty := gap()
		assert.LessOrEqual(t, empty, 2*theme.Padding(), "a blank band under the messages")
		v.Notice.SetText("A notice.")
		assert.True(t, v.Notice.Visible())
		assert.Greater(t, gap(), empty+v.Notice.MinSize().Height-1, "a notice takes its line")
		v.Notice.SetText("")
		v.Phase.SetText("reading prompt 3/10")
		assert.True(t, v.Phase.Visible())
		assert.Greater(t, gap(), empty+v.Phase.MinSize().Height-1)
		v.Phase.SetText("")
		assert.Equal(t, empty, gap(), "the line is given back")
	})
}
