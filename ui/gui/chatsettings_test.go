package gui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

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

// Defect 9: a bad field is marked in place and Save waits; nothing typed
// is lost; the system prompt belongs to the conversation and shows in it.
func TestChatSettingsValidateInPlace(t *testing.T) {
	u, v := chatUI(t, &fakeChat{})
	ui(func() {
		v.showChatSettings()
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top)
		save := findButton(top, "Save")
		require.NotNil(t, save)
		f := v.settings
		f.System.SetText("Answer in French.")
		f.Temperature.SetText("abc")
		assert.True(t, save.Disabled(), "Save waits for a valid temperature")
		assert.EqualError(t, f.Temperature.Validate(), "Temperature must be a number from 0 to 5")
		assert.Equal(t, "Answer in French.", f.System.Text, "nothing typed is lost")
		f.Temperature.SetText("0.8")
		f.Greedy.SetChecked(false)
		require.False(t, save.Disabled())
		test.Tap(save)
		assert.Equal(t, 0.8, v.Opts.Temperature)
		assert.False(t, v.Opts.Greedy)
		assert.Equal(t, "Answer in French.", v.SystemPrompt())
		require.NotEmpty(t, v.Views)
		assert.Equal(t, "System prompt (this conversation)", v.Views[0].header.Text, "the system prompt shows in the conversation")
	})
	ui(func() {
		v.NewConversation()
		assert.Equal(t, "", v.SystemPrompt(), "another conversation has its own")
		assert.True(t, v.Opts.Greedy, "and its own sampling")
	})
}
