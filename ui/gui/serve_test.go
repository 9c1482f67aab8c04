package gui

import (
	"testing"
	"time"

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
	n  int64
	on func(engine.Event)
}

func (f *fakeWatcher) WatchServer(on func(engine.Event)) { f.on = on }
func (f *fakeWatcher) ServedRequests() int64             { return f.n }

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
	fw.n = 1
	fw.on(engine.Event{Kind: engine.EventPhase, Text: bridge.AnsweringPhase(1), At: t0})
	fw.on(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: 300e6}, At: t0})
	fw.on(engine.Event{Kind: engine.EventStats, Stats: engine.Stats{RSSBytes: 320e6, TrunkBytesRead: 50e6}, At: t0.Add(500 * time.Millisecond)})
	ui(func() {
		assert.Equal(t, bridge.AnsweringPhase(1), v.Phase.Text)
		assert.Contains(t, v.Phase.Text, "answering a request from another program")
		assert.Equal(t, int64(320e6), v.Gauges.G.RSS, "the memory gauge follows the server's request")
		assert.InDelta(t, 100, v.Gauges.G.TrunkMBps, 1, "the reads gauge moves")
		assert.Equal(t, "answering request 1", v.servedNote)
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
}
