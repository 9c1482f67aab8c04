package gui

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// modelFolder makes a folder that reads as a model folder (its
// config.json) under parent, with a draft model beside it when draft.
func modelFolder(t *testing.T, parent, name string, draft bool) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644))
	if draft {
		modelFolder(t, dir, "draft", false)
	}
	return dir
}

// Issue 27 item 3: the picker lists the model folders used before (newest
// first), the demo and the server, and switches between them without the
// wizard: the next message opens the model chosen; a switch is refused
// while a reply is written.
func TestModelPickerKnowsTheFoldersUsedBefore(t *testing.T) {
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	var opened []bridge.Settings
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		opened = append(opened, s)
		return fc, nil
	}
	root := t.TempDir()
	older := modelFolder(t, root, "kimi-k3", false)
	newer := modelFolder(t, filepath.Join(root, "other"), "kimi-k3", false)
	modelFolder(t, u.B.DataDir, "demo-model", false)
	gone := filepath.Join(root, "deleted-since")
	for _, dir := range []string{gone, older, newer} {
		u.S.ModelDir = dir
		require.NoError(t, u.SaveSettings())
	}
	u.S.ServerURL = "http://gpu-box:8000/v1"
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	p := v.Picker
	const loads, loaded, asked = " · loads with the first message", " · loaded", " · asked with the first message"
	want := []string{"other/kimi-k3 — on this machine", "", "DEMO model — on this machine", "the server's model — on gpu-box:8000"}
	// the two folders share a name: their parents tell them apart
	want[1] = filepath.Base(root) + "/kimi-k3 — on this machine"
	ui(func() {
		// a stable order (N6): the demo, the folders by path, the servers
		assert.Equal(t, []string{want[2] + loads, want[1] + loads, want[0] + loads, want[3] + asked}, p.Select.Options,
			"the folder deleted since is not offered")
		assert.Equal(t, want[0]+loads, pickerShows(p))
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, want[0]+loaded, pickerShows(p))
		assert.Equal(t, want[1]+loads, p.Select.Options[1], "the others load with the first message")
		assert.Equal(t, want[0]+loaded, p.Select.Options[2])
		p.Select.SetSelected(want[1] + loads)
		assert.Equal(t, older, u.S.ModelDir)
		assert.Equal(t, older, bridge.LoadSettings(u.App.Preferences()).ModelDir, "the switch is kept")
		assert.Nil(t, v.Info, "the next message opens the folder chosen")
		assert.Equal(t, want[1]+loads, pickerShows(p))
		assert.Equal(t, want[1]+loads, p.Select.Options[1], "the entries stay where they were (N6)")
		assert.Equal(t, want[0]+loads, p.Select.Options[2], "the folder left is no longer loaded")
		v.Send("again")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	require.Len(t, opened, 2)
	assert.Equal(t, newer, opened[0].ModelDir)
	assert.Equal(t, older, opened[1].ModelDir)
	assert.Len(t, v.History, 4, "the conversation goes on")

	// the demo, then no switch while a reply is written
	fc.gate = make(chan struct{})
	ui(func() {
		p.Select.SetSelected("DEMO model — on this machine" + loads)
		assert.True(t, u.S.Demo)
		assert.Equal(t, u.demoDir(), u.S.ModelDir)
		v.Send("on the demo")
		p.Select.SetSelected(p.Select.Options[2])
		assert.Equal(t, u.demoDir(), u.S.ModelDir, "no switch during a reply")
		assert.Equal(t, "DEMO model — on this machine"+loads, pickerShows(p))
		assert.Contains(t, v.Notice.Text, "then switch the model")
	})
	for range 5 {
		fc.gate <- struct{}{}
	}
	waitFor(t, "turn", func() bool { return !v.Busy })
}

// Issue 25 item 5: the draft model beside the model can be turned off (and
// on) in the chat header; a chat engine that cannot switch it between
// turns (a fake here; the app's own can, TestDraftBoxSaysWhatItDoes) is
// opened again with the next message.
func TestDraftModelCanBeTurnedOff(t *testing.T) {
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	var opened []bridge.Settings
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		opened = append(opened, s)
		return fc, nil
	}
	u.S.ModelDir = modelFolder(t, t.TempDir(), "kimi-k3", true)
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	p := v.Picker
	ui(func() {
		assert.True(t, p.Draft.Visible())
		assert.True(t, p.Draft.Checked)
		assert.Equal(t, "Draft model", p.Draft.Text)
		assert.Equal(t, "kimi-k3 with draft model — on this machine · loads with the first message", pickerShows(p))
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		p.Draft.SetChecked(false)
		assert.True(t, u.S.NoDraft)
		assert.True(t, bridge.LoadSettings(u.App.Preferences()).NoDraft, "kept")
		assert.Nil(t, v.Info, "the next message opens the model again")
		assert.Equal(t, "kimi-k3 — on this machine · loads with the first message", pickerShows(p))
		v.Send("again")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	require.Len(t, opened, 2)
	assert.False(t, opened[0].NoDraft)
	assert.True(t, opened[1].NoDraft)
	assert.NotEqual(t, "", opened[0].OpenOptions(nil).Draft)

	// a model without a draft model shows no box
	ui(func() {
		u.S.ModelDir = t.TempDir()
		p.Refresh()
		assert.False(t, p.Draft.Visible())
	})
}

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
