package gui

import (
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// N3: a new conversation whose settings were changed before its first
// message is one conversation, titled from that message: no empty
// "Conversation …" stays behind in the list, and Ctrl+N on a new, empty
// conversation makes no second one.
func TestNewConversationSettingsLeaveNoGhost(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() { v.Send("first conversation") })
	waitFor(t, "reply", func() bool { return !v.Busy })
	var before []string
	ui(func() {
		before, _ = v.Store.List()
		v.NewConversation()
		v.NewConversation() // Ctrl+N again on the empty one
		v.showChatSettings()
		f := v.settings
		require.NotNil(t, f)
		f.Answers.SetSelected(answersJSON)
		test.Tap(findButton(u.Win.Canvas().Overlays().Top(), "Save"))
		require.True(t, isJSONAnswers(v.Opts))
		v.Send("Tell me a saying about time")
	})
	waitFor(t, "reply", func() bool { return !v.Busy })
	ui(func() {
		titles, err := v.Store.List()
		require.NoError(t, err)
		assert.Len(t, titles, len(before)+1, "titles %q", titles)
		assert.Contains(t, titles, "Tell me a saying about time")
		assert.Equal(t, titles, v.Convs.Shown())
		o, ok, err := v.Store.LoadOptions("Tell me a saying about time")
		require.NoError(t, err)
		assert.True(t, ok, "the settings did not follow the title")
		assert.True(t, isJSONAnswers(o))
	})
}
