package bridge

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
)

// G13: while the app's server answers a request, the window hears of it:
// the request's number as a phase, the engine's counters while it runs,
// an empty phase when it ends; the count of requests answered.
func TestServerRequestsReachTheWindow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 8
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var seen []engine.Event
	c.WatchServer(func(ev engine.Event) {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
	})
	url, err := c.StartServer(t.Context(), "127.0.0.1:0", "", func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, int64(0), c.ServedRequests())
	for range 2 {
		resp, err := http.Post(url+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"k3-demo","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Body.Close()
	}
	assert.Equal(t, int64(2), c.ServedRequests())
	mu.Lock()
	defer mu.Unlock()
	var phases []string
	stats := 0
	for _, ev := range seen {
		switch ev.Kind {
		case engine.EventPhase:
			phases = append(phases, ev.Text)
		case engine.EventStats:
			stats++
			assert.Greater(t, ev.Stats.RSSBytes, int64(0))
		}
	}
	assert.Equal(t, []string{AnsweringPhase(1), "", AnsweringPhase(2), ""}, phases)
	assert.GreaterOrEqual(t, stats, 4, "the counters at each request's start and end")
	assert.Contains(t, AnsweringPhase(1), "answering a request from another program")
}
