package gui

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// G28: with Thinking off, the trained demo still thinks first (its
// training; assets/demo TestNoThinkStillThinksFirst): the chat says so when
// Thinking is unticked, and takes it back when it is ticked again. Other
// models get no such note.
func TestThinkingOffOnTheDemoSaysItStillThinks(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	other := u.S.ModelDir
	demo := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, bridge.MakeDemoModel(demo))
	ui(func() {
		v.Thinking.SetChecked(false)
		assert.NotContains(t, v.Notice.Text, "DEMO")
		v.Thinking.SetChecked(true)
		u.S.ModelDir, u.S.Demo = demo, true
		v.Thinking.SetChecked(false)
		assert.Equal(t, bridge.ThinksFirstNote, v.Notice.Text)
		v.Thinking.SetChecked(true)
		assert.Equal(t, "", v.Notice.Text)
		u.S.Backend = bridge.BackendServer
		v.Thinking.SetChecked(false)
		assert.Equal(t, "", v.Notice.Text, "a server's model is not the demo")
	})
	assert.False(t, bridge.ThinksFirstAlways(bridge.Settings{ModelDir: other}))
}
