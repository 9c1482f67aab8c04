package gui

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/storage/filelock"
)

// Defect 8: a click on another conversation while a reply is written does
// not split the list from the view: the shown one stays highlighted, and
// the next message goes to the conversation shown and highlighted. A file
// that cannot be read keeps them in step too.
func TestSwitchingDuringAReplyKeepsListAndView(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, v := chatUI(t, fc)
	var first string
	ui(func() {
		first = v.Title
		v.NewConversation()
		v.Send("in the second")
	})
	second := ""
	ui(func() { second = v.Title })
	require.NotEqual(t, first, second)
	ui(func() {
		i := slices.Index(v.Convs.Shown(), first)
		require.GreaterOrEqual(t, i, 0)
		v.Convs.List.Select(i) // the user clicks the first conversation
		assert.Equal(t, second, v.Title, "the reply's conversation stays shown")
		assert.Equal(t, second, v.Convs.Selected, "and highlighted")
		assert.Contains(t, v.Notice.Text, "wait for it (or press Stop)")
	})
	for range 5 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		v.Send("next")
	})
	for range 5 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "turn", func() bool { return !v.Busy })
	h, err := v.Store.Load(second)
	require.NoError(t, err)
	assert.Len(t, h, 4, "the next message went to the conversation shown")

	// a broken file: the notice says so, and the highlight stays
	require.NoError(t, os.WriteFile(filepath.Join(u.conversationsDir(), "Broken"+chat.Ext), []byte("{\n{broken\n"), 0o644))
	ui(func() {
		v.reload(v.Title)
		i := slices.Index(v.Convs.Shown(), "Broken")
		require.GreaterOrEqual(t, i, 0)
		v.Convs.List.Select(i)
		assert.Equal(t, second, v.Title)
		assert.Equal(t, second, v.Convs.Selected)
		assert.NotEmpty(t, v.Notice.Text)
	})
}

// Defect 8: quitting while a reply is written keeps the partial reply in
// the file, marked stopped, as Stop does.
func TestQuitDuringAReplySavesIt(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, v := chatUI(t, fc)
	ui(func() { v.Send("Hi there") })
	fc.gate <- struct{}{}
	fc.gate <- struct{}{}
	waitFor(t, "two pieces", func() bool { return len(v.Views) == 2 && v.Views[1].Answer == "Hello world" })
	var title string
	ui(func() {
		title = v.Title
		u.Quit()
	})
	h, err := v.Store.Load(title)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, chat.Message{Role: "assistant", Content: "Hello world", ReasoningContent: "Let me think.", Cut: chat.CutStopped}, h[1])
	waitFor(t, "the turn to end", func() bool { return !v.Busy })
	h, err = v.Store.Load(title)
	require.NoError(t, err)
	assert.Len(t, h, 2, "the stopped turn does not add the reply twice")
}

// Walk-through 13 and the LM Studio list: conversations are titled from the
// first message and can be searched.
func TestConversationTitlesAndSearch(t *testing.T) {
	_, v := chatUI(t, &fakeChat{})
	ui(func() { v.Send("Where do penguins live?") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "Where do penguins live?", v.Title)
		v.NewConversation()
		v.Send("How tall is Mont Blanc?")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.ElementsMatch(t, []string{"Where do penguins live?", "How tall is Mont Blanc?"}, v.Convs.Shown())
		v.Convs.Query.SetText("penguin")
		assert.Equal(t, []string{"Where do penguins live?"}, v.Convs.Shown())
		v.Convs.Query.SetText("reply") // the replies' text is searched too
		assert.Len(t, v.Convs.Shown(), 2)
		v.Convs.Query.SetText("")
		assert.True(t, strings.HasPrefix(chat.Markdown(v.Title, v.History), "# How tall is Mont Blanc?\n\n## You\n\nHow tall is Mont Blanc?\n"))
	})
}

// The numbers under each reply and the versions of a regenerated reply or
// an edited message are kept in the history file: reopening the
// conversation (here in a new app on the same data) shows them again. The
// file keeps the old reply while its replacement is written, and a
// Regenerate that fails before writing anything brings the old reply back.
func TestStatsAndVersionsSurviveReopening(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	u, v := chatUI(t, fc)
	feed := func() {
		for range 5 {
			fc.gate <- struct{}{}
		}
		waitFor(t, "turn", func() bool { return !v.Busy })
	}
	ui(func() { v.Send("Question") })
	feed()
	var title, stats string
	ui(func() {
		title = v.Title
		stats = v.Views[1].statsLbl.Text
		require.True(t, strings.HasPrefix(stats, "2.0 tokens/s · 5 tokens · first token after"), stats)
		v.Opts.Greedy = false
		test.Tap(v.RegenBt)
		require.True(t, v.Busy)
	})
	fc.gate <- struct{}{}
	h, err := v.Store.Load(title)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, "Hello world, this is reply 1", h[1].Content, "the file keeps the old reply while the new one is written")
	for range 4 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "2/2", v.Views[1].navLbl.Text)
		test.Tap(v.Views[0].editBt)
		v.Entry.SetText("Question, edited")
		v.SendEntry()
	})
	feed()
	ui(func() {
		require.Equal(t, "Question, edited", v.Title, "the automatic title follows the edited first message")
		title = v.Title
	})

	// a new app on the same data folder opens the conversation as it was
	ui(u.Quit)
	a2 := test.NewTempApp(t)
	u2 := newTestUIOn(t, a2, &fakeChat{})
	u2.B.DataDir = u.B.DataDir
	u2.S = u.S
	u2.SaveSettings()
	u2.N.WizardDone.Set(true)
	u2.N.LastConversation.Set(title)
	ui(u2.Start)
	v2 := u2.Chat
	ui(func() {
		require.Equal(t, title, v2.Title)
		require.Len(t, v2.Views, 2)
		assert.Equal(t, "Question, edited", v2.History[0].Content)
		assert.Equal(t, "2/2", v2.Views[0].navLbl.Text, "the edited question has the old one as a version")
		assert.False(t, v2.Views[0].nav.Hidden)
		assert.True(t, v2.Views[1].nav.Hidden, "the new branch's reply has one version")
		assert.True(t, strings.HasPrefix(v2.Views[1].statsLbl.Text, "2.0 tokens/s · 5 tokens · first token after"), v2.Views[1].statsLbl.Text)
		assert.False(t, v2.Views[1].statsLbl.Hidden)
		assert.True(t, strings.HasPrefix(v2.Views[1].think.Items[0].Title, "Thought for "), v2.Views[1].think.Items[0].Title)

		v2.switchVersion(v2.Views[0], -1)
		assert.Equal(t, "Question", v2.History[0].Content)
		assert.Equal(t, "Hello world, this is reply 2", v2.History[1].Content)
		assert.Equal(t, "2/2", v2.Views[1].navLbl.Text, "the old branch keeps its two replies")
		v2.switchVersion(v2.Views[1], -1)
		assert.Equal(t, "Hello world, this is reply 1", v2.History[1].Content)
		assert.Equal(t, stats, v2.Views[1].statsLbl.Text, "each reply keeps its own numbers")
	})

	// a Regenerate that fails before writing anything brings the old reply
	// back, with its versions
	fc2 := &fakeChat{openErr: errors.New("the model folder is gone")}
	ui(func() {
		v2.engine = fc2
		v2.Opts.Greedy = false
		test.Tap(v2.RegenBt)
	})
	waitFor(t, "failed turn", func() bool { return !v2.Busy })
	ui(func() {
		require.Len(t, v2.History, 2)
		assert.Equal(t, "Hello world, this is reply 1", v2.History[1].Content)
		assert.Equal(t, "1/2", v2.Views[1].navLbl.Text)
		assert.Equal(t, "The model folder is gone.", v2.Notice.Text, "as a sentence (G26: no \"Something went wrong:\")")
	})
}

// A conversation saved before replies had numbers and versions opens as
// before: no numbers, no ‹ › arrows.
func TestOldHistoryFileOpens(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	old := `{"role":"user","content":"hi"}` + "\n" + `{"role":"assistant","content":"yo","reasoning_content":"hmm"}` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(u.conversationsDir(), "Old"+chat.Ext), []byte(old), 0o644))
	ui(func() {
		v.reload(v.Title)
		v.Open("Old")
		require.Equal(t, "Old", v.Title)
		require.Len(t, v.Views, 2)
		assert.Equal(t, "yo", v.Views[1].Answer)
		assert.True(t, v.Views[1].statsLbl.Hidden)
		assert.True(t, v.Views[1].nav.Hidden)
		assert.Equal(t, "Thinking", v.Views[1].think.Items[0].Title)
	})
}

func hiddenLocks(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".lock") {
			out = append(out, e.Name())
		}
	}
	return out
}

// The conversation open in the app holds its history lock, so `k3 chat`
// or a second app is refused it; one open elsewhere is shown with a notice
// and what is written goes beside it. Renaming and deleting take the lock
// file along, are refused while another k3 has the conversation, and lock
// files older versions left are swept.
func TestConversationLockWhileOpen(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	dir := u.conversationsDir()
	ui(func() { v.Send("hi") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	hi := filepath.Join(dir, "hi"+chat.Ext)
	_, err := chat.LockHistory(hi)
	require.ErrorIs(t, err, chat.ErrHistoryInUse, "the app holds the open conversation")
	assert.Equal(t, []string{".hi.jsonl.lock"}, hiddenLocks(t, dir), "the title taken from the message moved the lock file along")

	ui(func() { v.NewConversation() })
	// free once another is open: k3 chat (another process) takes it
	other, err := filelock.TryLock(filepath.Join(dir, ".hi.jsonl.lock"))
	require.NoError(t, err)
	ui(func() {
		v.Open("hi")
		assert.Equal(t, "hi", v.Title)
		assert.Contains(t, v.Notice.Text, "open in another k3 too")
		assert.EqualError(t, v.Delete("hi"), `"hi" is open in another k3 (a chat or another window): close it there, then delete it`)
		assert.ErrorContains(t, v.Rename("hi", "Trip"), "is open in another k3")
		v.Send("more")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	h, err := chat.LoadHistory(hi)
	require.NoError(t, err)
	assert.Len(t, h, 2, "the other k3's file is not written")
	ui(func() { assert.Equal(t, "hi.conflict-1", v.Title, "the conversation goes on beside it") })
	other.Unlock()

	ui(func() {
		v.Open("hi")
		assert.Empty(t, v.Notice.Text)
		require.NoError(t, v.Rename("hi", "Trip"))
	})
	assert.NotContains(t, hiddenLocks(t, dir), ".hi.jsonl.lock", "no lock file is left under the old name")
	_, err = chat.LockHistory(filepath.Join(dir, "Trip"+chat.Ext))
	require.ErrorIs(t, err, chat.ErrHistoryInUse, "the lock moved with the rename")
	ui(func() { require.NoError(t, v.Delete("Trip")) })
	assert.NotContains(t, hiddenLocks(t, dir), ".Trip.jsonl.lock", "deleting takes the lock file too")

	// a lock file an older version left beside a deleted conversation
	stale := filepath.Join(dir, ".gone.jsonl.lock")
	require.NoError(t, os.WriteFile(stale, []byte("123\n"), 0o644))
	ui(func() { v.Shutdown(); u.Chat = nil; u.ShowChat() })
	_, err = os.Stat(stale)
	assert.ErrorIs(t, err, os.ErrNotExist)
	for _, l := range hiddenLocks(t, dir) {
		_, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(strings.TrimPrefix(l, "."), ".lock")))
		assert.NoError(t, err, "%s belongs to a conversation", l)
	}
}
