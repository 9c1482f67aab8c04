package gui

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/ui/bridge"
)

// G25: in server mode "Start serving" is off (the status says why).
func TestServeOffInServerMode(t *testing.T) {
	u, _ := newTestUI(t, nil)
	u.S.Backend, u.S.ServerURL = bridge.BackendServer, "http://h:1/v1"
	p := NewServePanel(u)
	assert.True(t, p.Toggle.Disabled(), "Start serving is on though serving cannot work")
	assert.Contains(t, p.Status.Text, "serving needs the model on this machine")
}

// fakeWatcher is a chat engine's server as the window follows it.
type fakeWatcher struct {
	n         int64
	on        func(engine.Event)
	answering bool
	plan      int64
}

func (f *fakeWatcher) WatchServer(on func(engine.Event)) { f.on = on }
func (f *fakeWatcher) ServedRequests() int64             { return f.n }
func (f *fakeWatcher) Answering() bool                   { return f.answering }
func (f *fakeWatcher) PlanBytes() int64                  { return f.plan }

// G13: while the app's server answers a request, the status line says so
// with the request's number and the Engine panel's gauges move; the model
// line counts the requests answered; the app's own turn keeps its phase.
func TestServedRequestShowsInTheWindow(t *testing.T) {
	fc := &fakeChat{gate: make(chan struct{})}
	_, v := chatUI(t, fc)
	fw := &fakeWatcher{}
	ui(func() { v.watchServer(fw) })
	require.NotNil(t, fw.on)
	t0 := time.Now()
	fw.n, fw.plan = 1, 600e6
	fw.on(engine.Event{Kind: engine.EventPhase, Text: bridge.AnsweringPhase(1), At: t0})
	fw.on(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: 300e6}, At: t0})
	fw.on(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: 320e6, TrunkBytesRead: 50e6}, At: t0.Add(500 * time.Millisecond)})
	ui(func() {
		assert.Equal(t, bridge.AnsweringPhase(1), v.Phase.Text)
		assert.Contains(t, v.Phase.Text, "answering a request from another program")
		assert.Equal(t, int64(320e6), v.Gauges.G.RSS, "the memory gauge follows the server's request")
		assert.InDelta(t, 100, v.Gauges.G.TrunkMBps, 1, "the reads gauge moves")
		assert.Equal(t, "answering request 1", v.servedNote)
		assert.Equal(t, int64(600e6), v.Gauges.G.Budget, "the plan as the server grew it")
	})
	fw.on(engine.Event{Kind: engine.EventPhase, Text: ""})
	ui(func() {
		assert.Equal(t, "", v.Phase.Text)
		assert.Equal(t, "1 request answered", v.servedNote)
		assert.Equal(t, 0.0, v.Gauges.G.TrunkMBps, "nothing is read once it ended")
		v.Busy = true // the app's own message, waiting for the server's request
		v.Phase.SetText(bridge.WaitingForServer)
	})
	fw.n = 2
	fw.on(engine.Event{Kind: engine.EventPhase, Text: bridge.AnsweringPhase(2)})
	ui(func() {
		assert.Equal(t, bridge.WaitingForServer, v.Phase.Text, "the app's message says it waits for the server's request")
		assert.Equal(t, "answering request 2", v.servedNote)
		v.Busy = false
	})
	fw.on(engine.Event{Kind: engine.EventPhase, Text: ""})

	// a request that takes the engine as the app's reply ends: the status
	// says so, never empty while the engine works (N2)
	ui(func() {
		test.Type(v.Entry, "Hi")
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		require.True(t, v.Busy)
	})
	fw.n, fw.answering = 3, true
	fw.on(engine.Event{Kind: engine.EventPhase, Text: bridge.AnsweringPhase(3)})
	for range 5 {
		fc.gate <- struct{}{}
	}
	<-v.Idle()
	ui(func() {
		assert.Equal(t, bridge.AnsweringPhase(3), v.Phase.Text, "the reply ended while the server's request runs")
		assert.True(t, v.Gauges.G.Serving)
		assert.Contains(t, v.Gauges.Speed.Text, "request 3 from another program")
	})
	fw.answering = false
	fw.on(engine.Event{Kind: engine.EventPhase, Text: ""})
	ui(func() { assert.Equal(t, "", v.Phase.Text) })
}

// spyWatcher is the chat engine's server as the window follows it, with
// a hook after the window took each event (on the server's goroutine,
// under the request's hold on the engine).
type spyWatcher struct {
	bridge.ServeWatcher
	after func(engine.Event)
}

func (s *spyWatcher) WatchServer(on func(engine.Event)) {
	s.ServeWatcher.WatchServer(func(ev engine.Event) {
		on(ev)
		s.after(ev)
	})
}

// servingDemo is the chat on the demo model with the app's server
// started from its panel on loopback: the chat, the server's URL and the
// engine the window follows.
func servingDemo(t *testing.T) (*chatView, string, bridge.ServeWatcher) {
	t.Helper()
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
		p.Addr.SetText("127.0.0.1:0")
		test.Tap(p.Toggle)
	})
	waitFor(t, "serving", func() bool { return strings.HasPrefix(p.Status.Text, "Serving at http://127.0.0.1:") })
	t.Cleanup(func() { ui(func() { test.Tap(p.Toggle) }) })
	var url string
	var w bridge.ServeWatcher
	ui(func() {
		ec, err := u.localEngine()
		require.NoError(t, err)
		url = ec.ServerURL()
		w = ec.(bridge.ServeWatcher)
	})
	return u.Chat, url, w
}

// G13 over a real request on loopback to the app's server (the demo
// model): while the request is answered, the Engine panel's speed gauge
// shows its seconds per token and first token, from the engine's events
// as for the app's own replies (it stayed "—": only memory and disk
// moved), and the status says which request it is; a message sent in the
// app meanwhile says at once, from the moment Send is pressed, that it
// waits for the server's request (it sat empty, "starting the reply"), and
// its status is never empty or "ready" while it works; its own reply then
// comes, with its own numbers, and the panel shows the request's numbers
// labelled as such after it.
func TestServedRequestMovesTheSpeedGauge(t *testing.T) {
	v, url, w := servingDemo(t)
	// the request is held at its first token (the engine stays its own)
	// until the test has looked at the window
	held, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	t.Cleanup(let)
	var servedTokens atomic.Int64 // the tokens the panel counted for the request
	ui(func() {
		v.watchServer(&spyWatcher{ServeWatcher: w, after: func(ev engine.Event) {
			if ev.Kind != engine.EventToken {
				return
			}
			v.gaugePump().WithMeter(func(m *bridge.Meter) {
				if g := m.Gauges(); g.Serving && g.Served == 1 {
					servedTokens.Store(int64(g.Tokens))
				}
			})
			once.Do(func() { close(held); <-release })
		}})
	})
	var phases []string // the status while the app's message works
	ui(func() {
		changed := v.Phase.changed
		v.Phase.changed = func() {
			if v.Busy {
				phases = append(phases, v.Phase.Text)
			}
			changed()
		}
	})
	done := askServer(url, `{"model":"k3-demo","messages":[{"role":"user","content":"Tell me a saying."}],"max_tokens":12}`)
	select {
	case <-held:
	case a := <-done:
		t.Fatalf("the request ended (%v) and the window saw none of its tokens", a.err)
	}
	waitFor(t, "the speed gauge during the request", func() bool {
		return v.Gauges.G.Serving && v.Gauges.G.Tokens >= 1 && strings.Contains(v.Gauges.Speed.Text, "tokens/s")
	})
	ui(func() {
		assert.Contains(t, v.Gauges.Speed.Text, "request 1 from another program")
		assert.NotContains(t, v.Gauges.Speed.Text, "speed —")
		assert.NotContains(t, v.Gauges.Speed.Text, "first token after —")
		assert.Positive(t, v.Gauges.G.SecPerToken)
		assert.Equal(t, int64(1), v.Gauges.G.Served)
		assert.Equal(t, bridge.AnsweringPhase(1), v.Phase.Text)
		// the app's own message meanwhile: it says at once that it waits
		test.Type(v.Entry, "Hello")
		v.Entry.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
		require.True(t, v.Busy)
		assert.Equal(t, bridge.WaitingForServer, v.Phase.Text, "from the moment Send is pressed")
	})
	let()
	a := <-done
	require.NoError(t, a.err)
	require.Positive(t, a.completion)
	<-v.Idle()
	ui(func() {
		require.Len(t, v.Views, 2)
		assert.NotEmpty(t, v.Views[1].Answer+v.Views[1].Reasoning, "the app's own reply came after the request")
		require.NotEmpty(t, phases)
		assert.Equal(t, bridge.WaitingForServer, phases[0])
		for _, ph := range phases[:len(phases)-1] { // the last: the turn's end
			assert.NotEmpty(t, ph, "an empty status while the message works: %q", phases)
			assert.NotEqual(t, "ready", ph)
		}
		assert.Equal(t, int64(0), v.Gauges.G.Served, "the panel shows the app's reply's numbers")
		assert.Equal(t, "1 request answered", v.servedNote)
	})
	assert.Equal(t, int64(a.completion), servedTokens.Load(), "the panel counted every token of the request")
}

// served is a chat completion's answer: its completion tokens, or why
// there was none.
type served struct {
	completion int
	err        error
}

// askServer posts a chat completion to the server at url; the answer
// comes on the channel.
func askServer(url, body string) <-chan served {
	done := make(chan served, 1)
	go func() {
		resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			done <- served{err: err}
			return
		}
		defer resp.Body.Close()
		var r struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		done <- served{r.Usage.CompletionTokens, err}
	}()
	return done
}
