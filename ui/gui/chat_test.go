package gui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/engine/plan"
	"k3/ui/bridge"
)

func chatUI(t *testing.T, fc *fakeChat) (*appUI, *chatView) {
	t.Helper()
	u, _ := newTestUI(t, fc)
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	if u.Chat == nil {
		t.Fatal("chat not shown")
	}
	return u, u.Chat
}

func TestChatStreamStopKeepsPartial(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, v := chatUI(t, fc)
	ui(func() {
		test.Type(v.Entry, "Hi there")
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn}) // Enter sends
		if !v.Busy || v.Entry.Text != "" || !v.SendBt.Disabled() || v.StopBt.Disabled() {
			t.Fatalf("after Enter: busy %v entry %q", v.Busy, v.Entry.Text)
		}
	})
	fc.gate <- struct{}{}
	fc.gate <- struct{}{}
	waitFor(t, "two streamed pieces", func() bool { return len(v.Views) == 2 && v.Views[1].Answer == "Hello world" })
	ui(func() {
		r := v.Views[1]
		if r.Reasoning != "Let me think." || r.think.Hidden {
			t.Errorf("thinking section %q hidden %v", r.Reasoning, r.think.Hidden)
		}
		if v.Phase.Text != "answering" {
			t.Errorf("phase %q", v.Phase.Text)
		}
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape}) // Esc stops
	})
	waitFor(t, "turn end", func() bool { return !v.Busy })
	ui(func() {
		last := v.History[len(v.History)-1]
		if last.Role != "assistant" || last.Content != "Hello world" || last.Cut != "stopped" || last.ReasoningContent != "Let me think." {
			t.Errorf("kept %+v", last)
		}
		if v.Views[1].cutLbl.Hidden || !strings.Contains(v.Views[1].cutLbl.Text, "partial reply is kept") {
			t.Error("the stop must be visible on the reply")
		}
		assert.Equal(t, "", v.Phase.Text, "the reply says it was stopped; the phase line does not repeat it")
	})
	h, err := chat.LoadHistory(filepath.Join(u.conversationsDir(), v.Title+chat.Ext))
	if err != nil || len(h) != 2 || h[0].Content != "Hi there" || h[1].Content != "Hello world" || h[1].Cut != "stopped" {
		t.Fatalf("saved history %+v %v", h, err)
	}
}

// A turn with its gauges and the numbers under the reply; Regenerate with
// greedy decoding asks, then samples with a new seed, and the old reply
// stays a version (‹ 1/2 ›); editing an earlier message branches the same
// way (defect 7 and the LM Studio list).
func TestChatTurnGaugesRegenerateEdit(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() {
		v.SetSystemPrompt("Be brief.")
		v.Effort.SetSelected("low")
		v.Send("Question one")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		want := []string{"system", "user", "assistant"}
		require.Len(t, v.History, 3)
		for i, m := range v.History {
			assert.Equal(t, want[i], m.Role)
		}
		assert.Equal(t, "Hello world, this is reply 1", v.History[2].Content)
		assert.Equal(t, "low", fc.lastOpt.Effort)
		assert.True(t, fc.lastOpt.Thinking)
		assert.True(t, fc.lastOpt.Greedy)
		g := v.Gauges.G
		if g.Tokens != 5 || g.SecPerToken != 0.5 || g.RSS != 1.004e9 || g.PeakRSS != 1.004e9 || g.Budget != 4e9 || g.Available != 16e9 {
			t.Errorf("gauges %+v", g)
		}
		// the reply's own numbers once it is done (N7: one count)
		assert.True(t, strings.HasPrefix(v.Gauges.Speed.Text, "speed 2.0 tokens/s, 5 tokens (this conversation's last reply)"), v.Gauges.Speed.Text)
		assert.Equal(t, "2.0 tokens/s · 5 tokens · first token after "+fmt.Sprintf("%.2f", v.History[2].Stats.FirstTokenSeconds)+" s", v.Views[2].statsLbl.Text,
			"the numbers the chat engine measured")
		assert.False(t, v.Views[2].statsLbl.Hidden)
		assert.Equal(t, 0.0, g.TrunkMBps, "an idle engine reads nothing")
		assert.Equal(t, "", v.Phase.Text, "a finished reply leaves no phase line")
		assert.False(t, v.Phase.Visible())
		assert.Equal(t, "Question one", v.Title, "the conversation is titled from its first message")
		require.False(t, v.RegenBt.Disabled())
		test.Tap(v.RegenBt)
		tapDialog(t, u.Win, "Yes") // greedy: regenerate once with sampling
	})
	waitFor(t, "regenerate", func() bool { return !v.Busy })
	ui(func() {
		require.Len(t, v.History, 3)
		assert.Equal(t, "Hello world, this is reply 2", v.History[2].Content)
		assert.False(t, fc.lastOpt.Greedy, "the regeneration samples")
		assert.NotZero(t, fc.lastOpt.Seed, "with a new seed")
		assert.False(t, v.Views[2].nav.Hidden)
		assert.Equal(t, "2/2", v.Views[2].navLbl.Text)
		v.switchVersion(v.Views[2], -1)
		assert.Equal(t, "Hello world, this is reply 1", v.History[2].Content)
		assert.Equal(t, "1/2", v.Views[2].navLbl.Text)
		v.switchVersion(v.Views[2], +1)
		assert.Equal(t, "Hello world, this is reply 2", v.History[2].Content)

		test.Tap(v.Views[1].editBt) // edit the question
		assert.Equal(t, "Question one", v.Entry.Text)
		assert.Len(t, v.History, 1)
		assert.False(t, v.CancelBt.Hidden)
		v.Entry.SetText("Question one, edited")
		test.Tap(v.SendBt)
	})
	waitFor(t, "resend", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "Question one, edited", fc.last[len(fc.last)-1].Content)
		require.Len(t, v.History, 3)
		assert.Equal(t, "2/2", v.Views[1].navLbl.Text, "the question before the edit is a version")
		v.switchVersion(v.Views[1], -1)
		assert.Equal(t, "Question one", v.History[1].Content)
		assert.Equal(t, "Hello world, this is reply 2", v.History[2].Content, "with its reply")
	})
}

func TestChatEntryKeys(t *testing.T) {
	e := newChatEntry()
	w := test.NewTempWindow(t, e)
	w.Canvas().Focus(e)
	sent, stopped := 0, 0
	e.OnSend = func() { sent++ }
	e.OnStop = func() { stopped++ }
	test.Type(e, "a")
	e.KeyDown(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
	e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	e.KeyUp(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
	test.Type(e, "b")
	e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	e.TypedKey(&fyne.KeyEvent{Name: fyne.KeyEscape})
	if e.Text != "a\nb" || sent != 1 || stopped != 1 {
		t.Errorf("text %q sent %d stopped %d", e.Text, sent, stopped)
	}
}

func TestChatErrorsInPlainWords(t *testing.T) {
	pe := &engine.PlanError{Plan: &plan.Plan{Total: 40e9}, Err: errors.New("the memory plan needs 40.00 GB but only 15.20 GB is available")}
	fc := &fakeChat{openErr: pe}
	_, v := chatUI(t, fc)
	ui(func() { v.Send("hello") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		if !strings.HasPrefix(v.Notice.Text, "There is not enough memory for these settings: the memory plan needs 40.00 GB") ||
			!strings.Contains(v.Notice.Text, "step 4 Memory") {
			t.Errorf("notice %q", v.Notice.Text)
		}
		if len(v.Views) != 1 || len(v.History) != 1 {
			t.Errorf("an empty failed reply must not stay: %d views", len(v.Views))
		}
		// walk-through 22: the unanswered message can be retried
		assert.Equal(t, "Retry", v.RegenBt.Text)
		assert.False(t, v.RegenBt.Disabled())
	})
	if got := bridge.Explain(os.ErrNotExist); !strings.HasPrefix(got, "A file or folder is missing") {
		t.Errorf("not-exist: %q", got)
	}
}

func TestConversationsNewRenameDelete(t *testing.T) {
	_, v := chatUI(t, &fakeChat{})
	ui(func() {
		first := v.Title
		v.Send("one")
		_ = first
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		first := v.Title
		err := v.Rename(first, "Trip / plans")
		var re *chat.RenamedError
		if !errors.As(err, &re) {
			t.Fatalf("a changed name is said: %v", err)
		}
		if v.Title != "Trip - plans" || v.Convs.Selected != "Trip - plans" {
			t.Errorf("renamed to %q", v.Title)
		}
		// the renamed conversation is the older one, whatever the file
		// system's time granularity
		old := time.Now().Add(-time.Minute)
		require.NoError(t, os.Chtimes(filepath.Join(v.Store.Dir, v.Title+chat.Ext), old, old))
		v.NewConversation()
		if len(v.History) != 0 || len(v.Convs.Shown()) != 2 || v.Convs.Shown()[0] != v.Title {
			t.Errorf("new: %v current %q", v.Convs.Shown(), v.Title)
		}
		if err := v.Rename(v.Title, "Trip - plans"); err == nil || !strings.Contains(err.Error(), "already a conversation") {
			t.Errorf("duplicate rename: %v", err)
		}
		v.Open("Trip - plans")
		if len(v.History) != 2 || v.History[0].Content != "one" {
			t.Errorf("reopened %+v", v.History)
		}
		if err := v.Delete("Trip - plans"); err != nil {
			t.Fatal(err)
		}
		if len(v.Convs.Shown()) != 1 || v.Title == "Trip - plans" {
			t.Errorf("after delete %v current %q", v.Convs.Shown(), v.Title)
		}
	})
}

func TestSettingsPersist(t *testing.T) {
	a := test.NewTempApp(t)
	s := bridge.DefaultSettings()
	s.ModelDir, s.Layers, s.TrunkDir, s.Preset, s.TrunkGB, s.CacheGB = "/m", 7, "/t", "desktop", 16, 10.5
	s.TrunkCompress = true
	s.SystemPrompt, s.Thinking, s.Effort, s.Greedy, s.Temperature, s.TopP, s.TopK, s.Seed, s.MaxTokens = "sys", false, "max", false, 0.7, 0.9, 40, 3, 99
	s.Save(a.Preferences())
	if got := bridge.LoadSettings(a.Preferences()); got != s {
		t.Errorf("round trip\n got %+v\nwant %+v", got, s)
	}
	if got := bridge.LoadSettings(test.NewTempApp(t).Preferences()); got != bridge.DefaultSettings() {
		t.Errorf("defaults %+v", got)
	}
	o := s.ConvDefaults()
	f := newSettingsForm("sys", o)
	f.Temperature.SetText("9")
	if err := f.Apply(&o); err == nil || err.Error() != "Temperature must be a number from 0 to 5" {
		t.Errorf("bad temperature: %v", err)
	}
	assert.Equal(t, s.ConvDefaults(), o, "a bad field changes nothing")
	f.Temperature.SetText("1.1")
	f.MaxTokens.SetText("512")
	if err := f.Apply(&o); err != nil || o.Temperature != 1.1 || o.MaxTokens != 512 {
		t.Errorf("apply %v %+v", err, o)
	}
}

// What the app notes as it goes is bound to its own preference: setting it
// writes that key at once, a widget made with it edits the preference, and
// saving the settings (Done in the wizard, Save in a dialog) leaves it alone.
func TestAppNotesBoundToPreferences(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	prefs := u.App.Preferences()
	ui(func() { v.Send("Where do penguins live?") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	assert.Equal(t, "Where do penguins live?", prefs.String(bridge.KeyLastConversation), "the conversation open, titled from its message")
	ui(func() { v.NewConversation() })
	assert.Equal(t, v.Title, prefs.String(bridge.KeyLastConversation))
	ui(func() { require.NoError(t, v.Rename(v.Title, "Plans")) })
	assert.Equal(t, "Plans", prefs.String(bridge.KeyLastConversation))

	u.S.SystemPrompt = "changed"
	u.SaveSettings()
	assert.Equal(t, "Plans", prefs.String(bridge.KeyLastConversation), "saving the settings does not undo it")
	assert.True(t, prefs.Bool(bridge.KeyWizardDone))

	// the serve panel's address field is the preference
	ui(func() {
		p := NewServePanel(u)
		assert.Equal(t, bridge.DefaultServeAddr, p.Addr.Text)
		p.Addr.SetText("127.0.0.1:9999")
	})
	assert.Equal(t, "127.0.0.1:9999", prefs.String(bridge.KeyServeAddr))
	ui(func() { assert.Equal(t, "127.0.0.1:9999", NewServePanel(u).Addr.Text, "and shows it the next time") })

	// a new app on these preferences opens that conversation
	ui(func() { v.Shutdown() })
	u2 := newTestUIOn(t, u.App, &fakeChat{})
	u2.B.DataDir = u.B.DataDir
	ui(u2.Start)
	require.NotNil(t, u2.Chat)
	assert.Equal(t, "Plans", u2.Chat.Title)
	assert.Empty(t, u2.Chat.Notice.Text)
}

// The gauges follow the conversation on screen: opening another one drops
// the last turn's numbers and shows that conversation's last reply as its
// history saved it; a new conversation shows none; memory stays (it is the
// process's).
func TestGaugesFollowTheConversationOpened(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	saved := []chat.Message{{Role: "user", Content: "Earlier"},
		{Role: "assistant", Content: "Saved reply", Stats: &chat.ReplyStats{Tokens: 87, FirstTokenSeconds: 1.42, SecondsPerToken: 0.08}}}
	require.NoError(t, chat.SaveHistory(filepath.Join(u.conversationsDir(), "Older"+chat.Ext), saved))
	ui(func() { v.Send("Question one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	var mem string
	ui(func() {
		require.Equal(t, 5, v.Gauges.G.Tokens)
		assert.True(t, strings.HasPrefix(v.Gauges.Speed.Text, "speed 2.0 tokens/s, 5 tokens (this conversation's last reply)\nfirst token after "), v.Gauges.Speed.Text)
		mem = v.Gauges.MemText.Text
		require.Contains(t, mem, "in use 1.00 GB")

		v.reload(v.Title)
		v.Open("Older")
		require.Equal(t, "Older", v.Title)
		assert.Equal(t, "speed 12.5 tokens/s, 87 tokens (this conversation's last reply)\nfirst token after 1.42 s", v.Gauges.Speed.Text)
		assert.Zero(t, v.Gauges.G.Tokens)
		assert.False(t, v.Gauges.G.HitKnown)
		assert.Equal(t, mem, v.Gauges.MemText.Text, "memory is the process's: it stays")

		v.NewConversation()
		assert.Equal(t, "speed —\nfirst token after —", v.Gauges.Speed.Text)
		assert.Equal(t, mem, v.Gauges.MemText.Text)

		v.Open("Question one")
		assert.Equal(t, "speed 2.0 tokens/s, 5 tokens (this conversation's last reply)\nfirst token after "+
			fmt.Sprintf("%.2f s", v.History[1].Stats.FirstTokenSeconds), v.Gauges.Speed.Text)
	})
}

// A title made from the first message is made again when that message is
// edited and sent again; a title the user gave stays, and so does the
// title when a later message is edited.
func TestTitleRenewedWhenTheFirstMessageIsEdited(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	edit := func(i int, text string) {
		t.Helper()
		ui(func() {
			v.Edit(v.Views[i])
			require.True(t, v.Editing())
			v.Entry.SetText(text)
			v.SendEntry()
		})
		waitFor(t, "turn", func() bool { return !v.Busy })
	}
	ui(func() { v.Send("Question one") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() { require.Equal(t, "Question one", v.Title) })

	edit(0, "Where is the sea?")
	ui(func() {
		assert.Equal(t, "Where is the sea?", v.Title, "the automatic title follows the edited first message")
		assert.Equal(t, "Where is the sea?", u.N.lastConversation())
		assert.Equal(t, []string{"Where is the sea?"}, v.Convs.Shown())
		assert.Equal(t, "2/2", v.Views[0].navLbl.Text, "the first question stays a version")
	})
	h, err := chat.LoadHistory(filepath.Join(u.conversationsDir(), "Where is the sea?"+chat.Ext))
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, "Where is the sea?", h[0].Content)

	// a later message edited: the title is not the first message's business
	ui(func() { v.Send("Second question") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	edit(2, "Second question, edited")
	ui(func() { assert.Equal(t, "Where is the sea?", v.Title) })

	// numbered beside another conversation of the same first message
	ui(func() {
		v.NewConversation()
		v.Send("Where is the sea?")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() { require.Equal(t, "Where is the sea? 2", v.Title) })
	edit(0, "Where are the hills?")
	ui(func() { assert.Equal(t, "Where are the hills?", v.Title) })

	// renamed by the user: kept
	ui(func() { require.NoError(t, v.Rename(v.Title, "My walk")) })
	edit(0, "Where are the valleys?")
	ui(func() {
		assert.Equal(t, "My walk", v.Title, "a title the user gave stays")
		assert.Equal(t, "Where are the valleys?", v.History[0].Content)
	})
}

// A long paste is not wrapped (Fyne's word wrap of 5,000 words costs
// seconds, BenchmarkPaste5000Words): the box scrolls sideways, the text
// is whole; a short text, one with a line too wide to draw, or the box
// emptied after Send, wraps by words.
func TestLongPasteIsNotWrapped(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	cb := test.NewClipboard()
	ui(func() {
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping)
		cb.SetContent("a short question")
		v.Entry.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping)
		long := pasteText()
		cb.SetContent(long)
		v.Entry.SetText("")
		v.Entry.TypedShortcut(&fyne.ShortcutPaste{Clipboard: cb})
		assert.Equal(t, long, v.Entry.Text)
		assert.Equal(t, fyne.TextWrapOff, v.Entry.Wrapping)
		// its long lines scroll in the box: the window keeps its layout
		size := fyne.NewSize(1024, 640)
		u.Win.Resize(size)
		relayout(u.Win)
		assert.Empty(t, buttonsOutside(u.Win.Content(), size))
		assert.Less(t, v.Entry.Size().Width, float32(700))
		v.Entry.SetText("")
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping, "emptied")
		// one line far wider than the screen is drawn as a black bar
		// unwrapped: it is wrapped
		v.Entry.SetText(strings.Repeat("word ", 5000))
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping, "one long line")
		// typed past the length (the wrap follows the text)
		v.Entry.SetText(long[:longText])
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping)
		v.Entry.CursorRow = strings.Count(v.Entry.Text, "\n")
		v.Entry.CursorColumn = len(v.Entry.Text) - strings.LastIndex(v.Entry.Text, "\n") - 1
		v.Entry.TypedRune('x')
		assert.Equal(t, fyne.TextWrapOff, v.Entry.Wrapping)
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyBackspace})
		assert.Equal(t, fyne.TextWrapWord, v.Entry.Wrapping)
	})
}
