package bridge

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/storage/filelock"
)

func user(s string) chat.Message      { return msg("user", s) }
func assistant(s string) chat.Message { return msg("assistant", s) }

// The open conversation, without a window: opened with the app's
// defaults when it has no settings of its own, saved, read again.
func TestConversationOpenSaveReopen(t *testing.T) {
	dir := t.TempDir()
	c := NewConversation(dir)
	defer c.Release()
	defaults := chat.Options{Thinking: true, Effort: "max", MaxTokens: 100, Sampling: engine.Sampling{Greedy: true}}
	title, err := c.New("Trip", " Be brief. ")
	require.NoError(t, err)
	assert.Equal(t, "Trip", title)
	notice, err := c.Open(title, defaults)
	require.NoError(t, err)
	assert.Empty(t, notice)
	assert.Equal(t, defaults, c.Opts)
	assert.Equal(t, "Be brief.", c.SystemPrompt())
	c.AddUser("Where?")
	assert.Equal(t, -1, c.AddReply(assistant("North.")))
	moved, err := c.Save()
	require.NoError(t, err)
	assert.False(t, moved)
	c.Opts.Effort = "low"
	require.NoError(t, c.SaveOptions())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "Broken"+chat.Ext), []byte("not a history\n"), 0o600))
	_, err = c.Open("Broken", defaults)
	require.Error(t, err)
	assert.Equal(t, "Trip", c.Title, "a conversation that cannot be read changes nothing")

	c.Release()
	d := NewConversation(dir)
	defer d.Release()
	_, err = d.Open("Trip", defaults)
	require.NoError(t, err)
	assert.Equal(t, []string{"Be brief.", "Where?", "North."}, contents(d.History))
	assert.Equal(t, "low", d.Opts.Effort, "its own settings")

	assert.True(t, d.SetSystemPrompt("Be long."))
	assert.Equal(t, "Be long.", d.SystemPrompt())
	assert.True(t, d.SetSystemPrompt(" "))
	assert.Equal(t, []string{"Where?", "North."}, contents(d.History))
	assert.False(t, d.SetSystemPrompt(""), "nothing to remove")
	assert.True(t, d.SetSystemPrompt("Be kind."))
	assert.Equal(t, []string{"Be kind.", "Where?", "North."}, contents(d.History))

	require.NoError(t, d.Delete("Trip"))
	assert.Empty(t, d.Title)
	assert.Nil(t, d.History)
}

// An edit keeps the conversation from the edited message on as a version;
// Cancel edit brings it back; a Regenerate's new reply is a version too,
// and a turn that wrote nothing brings back the reply it was to replace.
func TestConversationVersions(t *testing.T) {
	c := NewConversation(t.TempDir())
	c.History = []chat.Message{user("Q1"), assistant("A1"), user("Q2"), assistant("A2")}

	assert.Equal(t, "Q2", c.Edit(2))
	assert.True(t, c.Editing())
	assert.Equal(t, []string{"Q1", "A1"}, contents(c.History))
	assert.Equal(t, 2, c.CancelEdit())
	assert.False(t, c.Editing())
	assert.Equal(t, []string{"Q1", "A1", "Q2", "A2"}, contents(c.History))
	assert.Equal(t, -1, c.CancelEdit(), "no edit")

	c.Edit(2)
	c.AddUser("Q2, edited")
	assert.False(t, c.Editing(), "sending ends the edit")
	assert.Equal(t, -1, c.AddReply(assistant("A2'")))
	assert.Equal(t, []string{"Q1", "A1", "Q2, edited", "A2'"}, contents(c.History))
	shown, n := c.Versions(2)
	assert.Equal(t, []int{1, 2}, []int{shown, n})
	require.True(t, c.SwitchVersion(2, -1))
	assert.Equal(t, []string{"Q1", "A1", "Q2", "A2"}, contents(c.History))
	assert.False(t, c.SwitchVersion(2, -1), "there is none before the first")
	require.True(t, c.SwitchVersion(2, +1))

	c.Fork(3) // Regenerate
	assert.Equal(t, []string{"Q1", "A1", "Q2, edited"}, contents(c.History))
	assert.Equal(t, 3, c.DropReply())
	assert.Equal(t, []string{"Q1", "A1", "Q2, edited", "A2'"}, contents(c.History))
	assert.Equal(t, -1, c.DropReply(), "no fork")
	c.Fork(3)
	assert.Equal(t, 3, c.AddReply(assistant("A2''")))
	shown, n = c.Versions(3)
	assert.Equal(t, []int{1, 2}, []int{shown, n})
	assert.Equal(t, "A2''", c.History[3].Content)
}

// A conversation still called by its date takes its title from its first
// message; a title the user gave stays. Renaming the open one keeps it
// open under the new title.
func TestConversationTitles(t *testing.T) {
	c := NewConversation(t.TempDir())
	defer c.Release()
	title, err := c.New(chat.AutoTitlePrefix+"2026-12-02 08.00", "")
	require.NoError(t, err)
	_, err = c.Open(title, chat.Options{})
	require.NoError(t, err)
	require.True(t, c.TitleFrom("How tall is Mont Blanc?"))
	assert.Equal(t, "How tall is Mont Blanc?", c.Title)
	c.AddUser("How tall is Mont Blanc?")
	assert.False(t, c.TitleFrom("And the Matterhorn?"), "only the first message names it")

	got, err := c.Rename(c.Title, "Alps/peaks")
	var re *chat.RenamedError
	require.True(t, errors.As(err, &re), "%v", err)
	assert.Equal(t, "Alps-peaks", got)
	assert.Equal(t, "Alps-peaks", c.Title)
	titles, err := c.Store.List()
	require.NoError(t, err)
	assert.Equal(t, []string{"Alps-peaks"}, titles)

	c.History = nil
	assert.False(t, c.TitleFrom("Something else"), "a title the user gave stays")
}

// A conversation another k3 holds is saved beside it, and continues there.
func TestConversationSavedBesideAnotherK3s(t *testing.T) {
	dir := t.TempDir()
	c := NewConversation(dir)
	defer c.Release()
	title, err := c.New("Shared", "")
	require.NoError(t, err)
	other, err := filelock.TryLock(filepath.Join(dir, ".Shared.jsonl.lock"))
	require.NoError(t, err)
	defer other.Unlock()
	notice, err := c.Open(title, chat.Options{})
	require.NoError(t, err)
	assert.Contains(t, notice, "open in another k3 too")
	c.AddUser("hello")
	moved, err := c.Save()
	assert.True(t, moved)
	var ce *chat.ConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, "Shared.conflict-1", c.Title)
	h, err := c.Store.Load(c.Title)
	require.NoError(t, err)
	assert.Equal(t, []string{"hello"}, contents(h))
	moved, err = c.Save()
	require.NoError(t, err, "it continues there")
	assert.False(t, moved)
}
