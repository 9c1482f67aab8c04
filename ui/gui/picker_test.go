package gui

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
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
// on) in the chat header; the next message opens the model without it.
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
		assert.Equal(t, "kimi-k3 — on this machine · loads with the first message", pickerShows(p), "the Draft model box says it")
		assert.Equal(t, []string{"kimi-k3 with draft model — on this machine · loads with the first message"}, p.Select.Options)
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

// Item 3: the chat header names the model and its state, and switches
// between the models the app knows (this machine's folder, the server)
// without the wizard.
func TestModelPicker(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = filepath.Join(t.TempDir(), "kimi-k3")
	u.S.TrunkDir = filepath.Join(t.TempDir(), "k3-trunk")
	u.S.ServerURL, u.S.ServerModel = "http://gpu-box:8000/v1", "moonshotai/Kimi-K3"
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	p := v.Picker
	ui(func() {
		assert.Equal(t, []string{"kimi-k3 — on this machine (trunk k3-trunk) · loads with the first message",
			"moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message"}, p.Select.Options)
		assert.Equal(t, "kimi-k3 — on this machine · loads with the first message", pickerShows(p), "the box leaves the trunk to the list")
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Equal(t, "kimi-k3 — on this machine · loaded", pickerShows(p))
		p.Select.SetSelected("moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message")
		assert.Equal(t, bridge.BackendServer, u.S.Backend)
		assert.Equal(t, bridge.BackendServer, bridge.LoadSettings(u.App.Preferences()).Backend, "the switch is not kept")
		assert.Nil(t, v.Info, "the old engine stays in use")
		assert.Equal(t, "moonshotai/Kimi-K3 — on gpu-box:8000 · asked with the first message", pickerShows(p))
		assert.Len(t, v.History, 2, "the conversation goes on")
	})
}

// Issue 27 item 3: the picker in the chat header shows the draft model
// beside the model folder (a "draft" folder with its config.json).
func TestModelPickerShowsTheDraft(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	u.S.ModelDir = filepath.Join(t.TempDir(), "kimi-k3")
	require.NoError(t, os.MkdirAll(filepath.Join(u.S.ModelDir, "draft"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(u.S.ModelDir, "draft", "config.json"), []byte("{}"), 0o644))
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	require.NotNil(t, u.Chat)
	ui(func() {
		assert.Equal(t, []string{"kimi-k3 with draft model — on this machine · loads with the first message"}, u.Chat.Picker.Select.Options)
		// the box leaves the draft model to the Draft model box beside it
		assert.Equal(t, "kimi-k3 — on this machine · loads with the first message", pickerShows(u.Chat.Picker))
		assert.True(t, u.Chat.Picker.Draft.Visible() && u.Chat.Picker.Draft.Checked)
	})
}

// Issue 27 item 3: the picker remembers every server used (address and
// model; each key in the key store, none in the preferences), lists them
// with this machine's models, each with its state, and switches between
// them without the wizard, each with its own key. Opening the picker asks
// no server anything.
func TestModelPickerRemembersServers(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	fc := &fakeChat{}
	u, _ := newTestUI(t, fc)
	var opened []bridge.Settings
	u.B.NewChat = func(s bridge.Settings) (bridge.ChatEngine, error) {
		opened = append(opened, s)
		return fc, nil
	}
	u.S.ModelDir = modelFolder(t, t.TempDir(), "kimi-k3", false)
	require.NoError(t, u.SaveSettings())
	a, b := srv.URL+"/v1", "http://gpu-box:8000/v1"
	require.NoError(t, u.S.SetServer(a, "sk-a", "m1"))
	require.NoError(t, u.SaveSettings())
	require.NoError(t, u.S.SetServer(b, "sk-b", ""))
	require.NoError(t, u.SaveSettings())
	assert.NotContains(t, u.App.Preferences().String("servers.known"), "sk-", "a key in the preferences")
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	p := v.Picker
	host := strings.TrimPrefix(srv.URL, "http://")
	local := "kimi-k3 — on this machine · loads with the first message"
	onA, onB := "m1 — on "+host+" · asked with the first message", "the server's model — on gpu-box:8000 · asked with the first message"
	ui(func() {
		assert.Equal(t, []string{local, onA, onB}, p.Select.Options, "a stable order: the folders, then the servers by address (N6)")
		assert.Equal(t, onB, pickerShows(p))
		p.Select.Tapped(&fyne.PointEvent{}) // the list open
		p.Select.SetSelected(onA)
		assert.Equal(t, a, u.S.ServerURL)
		assert.Equal(t, "m1", u.S.ServerModel)
		assert.Equal(t, "sk-a", u.S.ServerKey, "the server's own key")
		kept := bridge.LoadSettings(u.App.Preferences())
		assert.Equal(t, a, kept.ServerURL, "the switch is kept")
		assert.Equal(t, bridge.BackendServer, kept.Backend)
		v.Send("hi")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		inUse := "m1 — on " + host + " · in use"
		assert.Equal(t, []string{local, inUse, onB}, p.Select.Options)
		assert.Equal(t, inUse, pickerShows(p))
		p.Select.SetSelected(onB)
		assert.Equal(t, "sk-b", u.S.ServerKey)
		assert.Equal(t, "", u.S.ServerModel)
		v.Send("again")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		p.Select.SetSelected(p.Select.Options[0])
		assert.Equal(t, bridge.BackendLocal, u.S.Backend)
		assert.Len(t, p.Select.Options, 3, "both servers stay offered")
		v.Send("here")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() { assert.Equal(t, "kimi-k3 — on this machine · loaded", pickerShows(p)) })
	require.Len(t, opened, 3)
	assert.Equal(t, a, opened[0].ServerURL)
	assert.Equal(t, b, opened[1].ServerURL)
	assert.Equal(t, bridge.BackendLocal, opened[2].Backend)
	assert.Equal(t, "sk-a", opened[0].ServerKey)
	assert.Equal(t, "sk-b", opened[1].ServerKey)
	assert.Zero(t, hits.Load(), "the picker asked a server")

	// the next start offers both, with their keys
	u2 := newAppUI(u.App, test.NewTempWindow(t, nil), u.B)
	assert.Equal(t, "sk-b", u2.S.ServerKey, "the key of the last server chosen")
	assert.Len(t, bridge.LoadKnownServers(u.App.Preferences()), 2)
}

// pickerShows is what the chat header shows of the model in use: its name
// in the list's box, then its state beside it.
func pickerShows(p *modelPicker) string { return p.Select.Selected + " · " + p.State.Text }
