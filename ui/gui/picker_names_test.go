package gui

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// N6: two demo folders are told apart (only the app's own is "DEMO
// model"), one server is listed once (a nameless entry beside a named one
// at its address goes), the order stays when the selection changes, and a
// server that refused the last message says so.
func TestPickerTellsModelsApart(t *testing.T) {
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		if s.Backend == bridge.BackendServer {
			return nil, nil
		}
		return fc, nil
	}
	demo := modelFolder(t, u.B.DataDir, "demo-model", false)
	large := modelFolder(t, t.TempDir(), "large", false)
	u.S.ModelDir, u.S.Demo = demo, true
	require.NoError(t, u.SaveSettings())
	u.S.ModelDir = large
	require.NoError(t, u.SaveSettings())
	srv := "http://127.0.0.1:1/v1"
	require.NoError(t, u.S.SetServer(srv, "", ""))
	require.NoError(t, u.SaveSettings())
	require.NoError(t, u.S.SetServer(srv, "", "small"))
	require.NoError(t, u.SaveSettings())
	u.S.Backend = bridge.BackendLocal
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	p := v.Picker
	const loads, asked = " · loads with the first message", " · asked with the first message"
	want := []string{"DEMO model — on this machine" + loads, "large (a demo model) — on this machine" + loads, "small — on 127.0.0.1:1" + asked}
	ui(func() {
		require.Equal(t, u.demoDir(), demo)
		assert.Equal(t, want, p.Select.Options)
		p.Select.SetSelected(want[0])
		assert.Equal(t, want, p.Select.Options, "the entries moved under the mouse")
		// a server that did not answer says so
		v.serverDown = map[string]bool{srv: true}
		p.Refresh()
		assert.Equal(t, "small — on 127.0.0.1:1 · "+stateDown, p.Select.Options[2])
	})
}
