package gui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/ui/bridge"
	"k3/ui/remote"
)

// vllmStub replays a vLLM-shaped stream (thinking under "reasoning", one
// tool call in pieces) on a loopback port.
func vllmStub(t *testing.T) *httptest.Server {
	head := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"moonshotai/Kimi-K3",`
	chunks := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"reasoning":"Weather, so a tool."},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"Checking."},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"id":"t1","type":"function","index":0,"function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		head + `"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"message":"bad key"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"moonshotai/Kimi-K3"},{"id":"other"}]}`)
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range chunks {
				fmt.Fprintf(w, "data: %s\n\n", c)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestChatOnAServer: with "Use a server" the chat streams from the server:
// thinking, the answer, the tool call shown, the gauges' tokens.
func TestChatOnAServer(t *testing.T) {
	srv := vllmStub(t)
	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.Backend, u.S.ServerURL, u.S.ServerKey = bridge.BackendServer, srv.URL+"/v1", "k"
	u.SaveSettings()
	ui(u.Start)
	require.NotNil(t, u.Chat, "a server is enough to chat, without the wizard")
	v := u.Chat
	ui(func() { v.Send("Weather in Paris?") })
	waitFor(t, "turn", func() bool { return !v.Busy })
	ui(func() {
		assert.Empty(t, v.Notice.Text)
		last := v.History[len(v.History)-1]
		assert.Equal(t, "Weather, so a tool.", last.ReasoningContent)
		assert.Equal(t, `Checking.`+"\n\n"+`[tool call: get_weather {"city": "Paris"}]`, last.Content)
		assert.Equal(t, chat.Cut(""), last.Cut)
		assert.Equal(t, "moonshotai/Kimi-K3 on "+strings.TrimPrefix(srv.URL, "http://"), v.Info.Name)
		assert.Equal(t, 2, v.Gauges.G.Tokens, "one per text delta")
		assert.Equal(t, "", v.Phase.Text)
		// this machine's memory and disk gauges do not apply to a server
		assert.False(t, v.Gauges.Local.Visible(), "local gauges shown for a server")
		assert.True(t, v.Gauges.Speed.Visible())
	})
}

// TestWizardOffersAServer: the model step offers "Use a server instead…",
// which opens the choice of where the model runs.
func TestWizardOffersAServer(t *testing.T) {
	u, _ := newTestUI(t, nil)
	ui(u.Start)
	ui(func() {
		u.wizard.Go(1)
		bt := u.wizard.Model.ServerBt
		require.NotNil(t, bt)
		assert.Equal(t, "Use a server instead…", bt.Text)
		require.Nil(t, u.Win.Canvas().Overlays().Top())
		test.Tap(bt)
		require.NotNil(t, u.Win.Canvas().Overlays().Top(), "no dialog opened")
	})
}

// TestBackendForm: the model list comes from the server; Apply keeps the
// choice; a bad address is explained.
func TestBackendForm(t *testing.T) {
	srv := vllmStub(t)
	test.NewTempApp(t)
	f := NewBackendForm(bridge.DefaultSettings(), func(fn func()) { ui(fn) })
	assert.True(t, f.URL.Disabled(), "server fields are off while the model runs here")
	ui(func() {
		f.Where.SetSelected(choiceServer)
		f.URL.SetText(srv.URL)
		f.Key.SetText("k")
		test.Tap(f.Find)
	})
	waitFor(t, "models", func() bool { return len(f.Model.Options) == 2 })
	ui(func() {
		assert.Equal(t, "moonshotai/Kimi-K3", f.Model.Selected)
		f.Model.SetSelected("other")
		s := bridge.DefaultSettings()
		require.NoError(t, f.Apply(&s))
		assert.Equal(t, bridge.BackendServer, s.Backend)
		assert.Equal(t, srv.URL+"/v1", s.ServerURL)
		assert.Equal(t, "k", s.ServerKey)
		assert.Equal(t, "other", s.ServerModel)
		assert.True(t, s.CanChat())
		f.URL.SetText("not a url")
		assert.ErrorContains(t, f.Apply(&s), "http://HOST:PORT/v1")
		f.Where.SetSelected(choiceLocal)
		require.NoError(t, f.Apply(&s))
		assert.Equal(t, bridge.BackendLocal, s.Backend)
	})
}

// TestServeLoadedModel: the app serves the demo model it loaded; a client
// on loopback gets replies while the app's chat also runs turns; closing
// the chat engine stops the server.
func TestServeLoadedModel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, bridge.MakeDemoModel(dir))
	s := bridge.DefaultSettings()
	s.ModelDir, s.Demo = dir, true
	ce := bridge.NewEngineChat(s)
	ec := ce.(bridge.Server)
	url, err := ec.StartServer(context.Background(), "127.0.0.1:0", "", func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, url, ec.ServerURL())
	_, err = ec.StartServer(context.Background(), "0.0.0.0:0", "", func(engine.Event) {})
	require.NoError(t, err, "a second start returns the running server")

	c, err := remote.New(url, "", "")
	require.NoError(t, err)
	id, err := c.Resolve(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "k3-demo", id)
	opt := chat.Options{Thinking: true, MaxTokens: 6, Sampling: engine.Sampling{Greedy: true}}
	history := []chat.Message{{Role: "user", Content: "Hello"}}
	done := make(chan error, 1)
	go func() {
		_, err := ce.Turn(context.Background(), history, opt, func(engine.Event) {})
		done <- err
	}()
	r, err := c.Turn(context.Background(), history, opt, nil)
	require.NoError(t, err)
	require.NoError(t, <-done)
	assert.Equal(t, 6, r.Usage.CompletionTokens)
	// the same conversation in the app gives the same reply
	msg, err := ce.Turn(context.Background(), history, opt, func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, coerceJSON(msg.ReasoningContent+msg.Content), r.Message.ReasoningContent+r.Message.Content)

	ce.Close()
	assert.Empty(t, ec.ServerURL())
	_, err = c.Models(context.Background())
	assert.ErrorContains(t, err, "could not reach the server")

	_, err = bridge.NewEngineChat(s).(bridge.Server).StartServer(context.Background(), "0.0.0.0:0", "", func(engine.Event) {})
	assert.ErrorContains(t, err, "API key")
}

// coerceJSON is s as it comes out of JSON (invalid UTF-8, which the random
// demo model writes, becomes U+FFFD).
func coerceJSON(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// TestServePanelToggle: the panel starts and stops the server for the
// chat's model.
func TestServePanelToggle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, bridge.MakeDemoModel(dir))
	u, _ := newTestUI(t, nil)
	u.B.NewChat = bridge.NewChatFor
	u.S.ModelDir, u.S.Demo = dir, true
	u.N.WizardDone.Set(true)
	ui(u.Start)
	var p *ServePanel
	ui(func() {
		p = NewServePanel(u)
		assert.Equal(t, "Start serving", p.Toggle.Text)
		p.Addr.SetText("127.0.0.1:0")
		test.Tap(p.Toggle)
	})
	waitFor(t, "serving", func() bool { return strings.HasPrefix(p.Status.Text, "Serving at http://127.0.0.1:") })
	var url string
	ui(func() {
		assert.Equal(t, "Stop serving", p.Toggle.Text)
		ec, err := u.localEngine()
		require.NoError(t, err)
		url = ec.ServerURL()
		// G13: the main window says the model is served
		assert.Equal(t, "loaded · serving at "+url, u.Chat.Picker.State.Text)
	})
	// the Engine panel says which model the server loaded, with its plan
	// and the memory (it said "No model loaded yet" and "available —")
	waitFor(t, "the panel's model", func() bool { return u.Chat.Info != nil })
	ui(func() {
		assert.Contains(t, u.Chat.Gauges.Model.Text, "DEMO model")
		assert.Positive(t, u.Chat.Gauges.G.Budget)
		assert.NotContains(t, u.Chat.Gauges.MemText.Text, "plan —")
	})
	resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	ui(func() { test.Tap(p.Toggle) })
	waitFor(t, "stopped", func() bool { return p.Status.Text == "Stopped." })
	ui(func() {
		assert.Equal(t, "Start serving", p.Toggle.Text)
		assert.NotContains(t, u.Chat.Picker.State.Text, "serving")
	})

	// on a server backend the panel says why it cannot serve
	ui(func() {
		u.S.Backend = bridge.BackendServer
		p2 := NewServePanel(u)
		test.Tap(p2.Toggle)
		assert.Contains(t, p2.Status.Text, "serving needs the model on this machine")
	})
}
