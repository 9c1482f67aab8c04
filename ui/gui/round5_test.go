package gui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

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

// setAnswers picks choice in the conversation's Settings… dialog and saves.
func setAnswers(t *testing.T, u *appUI, v *chatView, choice string) {
	t.Helper()
	v.showChatSettings()
	top := u.Win.Canvas().Overlays().Top()
	require.NotNil(t, top)
	v.settings.Answers.SetSelected(choice)
	test.Tap(findButton(top, "Save"))
}

// Issue 30 item 4 in the app: a conversation's answers are free text or
// JSON; the choice is kept with the conversation and reaches the engine as
// its response_format; "for new conversations" carries it over.
func TestAnswersJSONReachesTheEngine(t *testing.T) {
	fc := &fakeChat{}
	u, v := chatUI(t, fc)
	ui(func() {
		v.showChatSettings()
		assert.Equal(t, []string{"Free text", "JSON"}, v.settings.Answers.Options)
		assert.Equal(t, "Free text", v.settings.Answers.Selected)
		u.Win.Canvas().Overlays().Top().Hide()
		u.Win.Canvas().Overlays().Remove(u.Win.Canvas().Overlays().Top())
		setAnswers(t, u, v, "JSON")
		assert.JSONEq(t, `{"type":"json_object"}`, string(v.Opts.ResponseFormat))
		v.Send("a saying")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	assert.JSONEq(t, `{"type":"json_object"}`, string(fc.lastOpt.ResponseFormat), "the engine holds the answer to JSON")
	title := v.Title
	ui(func() {
		v.NewConversation()
		assert.Empty(t, v.Opts.ResponseFormat, "another conversation has its own")
		v.Open(title)
		assert.JSONEq(t, `{"type":"json_object"}`, string(v.Opts.ResponseFormat), "kept with the conversation")
		v.showChatSettings()
		assert.Equal(t, "JSON", v.settings.Answers.Selected)
		v.settings.ForNew.SetChecked(true)
		test.Tap(findButton(u.Win.Canvas().Overlays().Top(), "Save"))
		assert.True(t, u.S.JSONAnswers)
		assert.True(t, bridge.LoadSettings(u.App.Preferences()).JSONAnswers)
		v.NewConversation()
		assert.JSONEq(t, `{"type":"json_object"}`, string(v.Opts.ResponseFormat), "new conversations start with JSON")
		setAnswers(t, u, v, "Free text")
		assert.Empty(t, v.Opts.ResponseFormat)
		v.Send("free")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	assert.Empty(t, fc.lastOpt.ResponseFormat)
}

// The JSON choice reaches a server as response_format (and free text sends
// none).
func TestAnswersJSONSentToAServer(t *testing.T) {
	var mu sync.Mutex
	var formats []json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m"}]}`)
			return
		}
		var q struct {
			ResponseFormat json.RawMessage `json:"response_format"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		mu.Lock()
		formats = append(formats, q.ResponseFormat)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"{\"a\": 1}"},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.Backend, u.S.ServerURL, u.S.ServerModel = bridge.BackendServer, srv.URL+"/v1", "m"
	require.NoError(t, u.SaveSettings())
	ui(u.Start)
	v := u.Chat
	ui(func() {
		setAnswers(t, u, v, "JSON")
		v.Send("as JSON")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		setAnswers(t, u, v, "Free text")
		v.Send("as text")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, formats, 2)
	assert.JSONEq(t, `{"type":"json_object"}`, string(formats[0]))
	assert.Empty(t, formats[1], "free text sends no response_format")
	assert.Equal(t, `{"a": 1}`, v.History[1].Content)
}

// On the real demo engine the JSON choice gives a reply that is one valid
// JSON object (the constrained sampler), with thinking on as by default.
func TestAnswersJSONOnTheDemoIsValidJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, bridge.MakeDemoModel(dir))
	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.ModelDir, u.S.Demo = dir, true
	require.NoError(t, u.SaveSettings())
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	ui(func() {
		setAnswers(t, u, v, "JSON")
		v.Opts.MaxTokens = 200
		v.Send("Tell me a saying about work.")
	})
	waitFor(t, "turn", func() bool { return !v.Busy })
	require.Len(t, v.History, 2)
	reply := v.History[1]
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(reply.Content), &obj), "the reply %q", reply.Content)
	assert.Empty(t, reply.Cut)
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

// gui-check 2-model: the Download part of step 2 showed a blank band under
// its progress bar (an empty status line); an empty status takes no room.
func TestModelStepEmptyStatusTakesNoRoom(t *testing.T) {
	u, _ := newTestUI(t, &fakeChat{})
	ui(u.Start)
	w := u.wizard
	d := fyne.CurrentApp().Driver()
	ui(func() {
		w.Go(1)
		u.Win.Resize(fyne.NewSize(1280, 760))
		relayout(u.Win)
		m := w.Model
		assert.Equal(t, "", m.DlStatus.Text)
		assert.False(t, m.DlStatus.Visible())
		assert.False(t, m.VfStatus.Visible())
		assert.False(t, m.dlSide.Visible(), "no file lines, no room for them")
		gap := func() float32 {
			relayout(u.Win)
			return d.AbsolutePositionForObject(m.VerifyBt).Y - (d.AbsolutePositionForObject(m.DlBar).Y + m.DlBar.Size().Height)
		}
		empty := gap()
		m.DlStatus.SetText("Connecting to the model hub…")
		m.setFiles("model-00001-of-00002.safetensors  done")
		assert.GreaterOrEqual(t, gap(), empty+m.DlStatus.MinSize().Height+m.DlFiles.MinSize().Height)
		m.DlStatus.SetText("")
		m.setFiles("")
		assert.Equal(t, empty, gap(), "the lines give their room back")
	})
}
