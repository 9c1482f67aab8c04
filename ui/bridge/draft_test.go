package bridge

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
)

// Issue 27 item 3: the draft model beside the model (the demo has one) is
// found, opened with the model and named; a folder without one opens alone.
func TestEngineChatOpensTheDraftBeside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	assert.Equal(t, filepath.Join(dir, "draft"), DraftBeside(dir))
	assert.Equal(t, "", DraftBeside(t.TempDir()))
	assert.Equal(t, "", DraftBeside(""))

	s := DefaultSettings()
	s.ModelDir, s.Demo = dir, true
	assert.Equal(t, filepath.Join(dir, "draft"), s.OpenOptions(nil).Draft)
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	info, err := c.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	require.NotNil(t, c.m.DraftModel())
	assert.Equal(t, "DEMO model (a tiny Kimi K3 trained on sayings and drawings) with draft model", info.Name)

	// a draft folder that is not one only costs the draft
	bad := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(bad))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "draft", "config.json"), []byte("{}"), 0o644))
	c2 := NewEngineChat(Settings{ModelDir: bad, Demo: true, MaxTokens: 64}).(*engineChat)
	t.Cleanup(c2.Close)
	info, err = c2.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	assert.Nil(t, c2.m.DraftModel())
	assert.Equal(t, "DEMO model (a tiny Kimi K3 trained on sayings and drawings)", info.Name)
}

// Tokens per pass: the first token from the prompt, then one per pass
// plus the drafts it accepted.
func TestTokensPerPass(t *testing.T) {
	assert.Equal(t, 2.5, Gauges{Tokens: 11, Drafted: 8, Accepted: 6}.TokensPerPass())
	assert.Equal(t, 1.0, Gauges{Tokens: 11, Drafted: 8}.TokensPerPass())
	assert.Equal(t, 0.0, Gauges{Tokens: 11}.TokensPerPass(), "no draft verified")
	assert.Equal(t, 0.0, Gauges{Tokens: 1, Drafted: 3}.TokensPerPass(), "no pass after the first token")
}

// G12: tokens that arrive in a burst (a server's stream through buffers)
// do not make the "last" speed absurd: it is measured over about a second.
func TestLastSpeedOverASecond(t *testing.T) {
	var m Meter
	t0 := time.Unix(1000, 0)
	m.StartTurn(t0)
	at := t0
	for range 10 { // 10 tokens/s
		at = at.Add(100 * time.Millisecond)
		m.Token(at, 0.1)
	}
	at = at.Add(2 * time.Microsecond) // the next arrives in the same read
	m.Token(at, 2e-6)
	g := m.Gauges()
	assert.InDelta(t, 0.900002/10, g.LastToken, 1e-9, "the last second's steps (the first, with the prompt, aside), not the 2 µs one")
	assert.Less(t, 1/g.LastToken, 12.0)
	m.Token(at.Add(3*time.Second), 3) // a slow step is its own speed
	assert.Equal(t, 3.0, m.Gauges().LastToken)
	m.StartTurn(at.Add(4 * time.Second)) // a new turn starts afresh
	m.Token(at.Add(5*time.Second), 7)
	m.Token(at.Add(6*time.Second), 0.5)
	assert.Equal(t, 0.5, m.Gauges().LastToken)
}

// G13: a message sent while the app's server answers a request says what
// it waits for, then runs.
func TestTurnSaysItWaitsForTheServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 8
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	_, err := c.StartServer(t.Context(), "127.0.0.1:0", "", func(engine.Event) {})
	require.NoError(t, err)
	c.mu.Lock() // a request of the server's is running
	waiting := make(chan struct{})
	done := make(chan error, 1)
	var phases []string
	go func() {
		_, err := c.Turn(t.Context(), []chat.Message{{Role: "user", Content: "Hi"}}, s.ConvDefaults(), func(ev engine.Event) {
			if ev.Kind == engine.EventPhase {
				phases = append(phases, ev.Text)
				if ev.Text == WaitingForServer {
					close(waiting)
				}
			}
		})
		done <- err
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second): // a guard: without the phase the turn just waits
		c.mu.Unlock()
		<-done
		t.Fatalf("no %q phase while the server held the engine (phases %q)", WaitingForServer, phases)
	}
	c.mu.Unlock() // the request ends
	require.NoError(t, <-done)
	require.NotEmpty(t, phases)
	assert.Equal(t, WaitingForServer, phases[0])
	assert.NotContains(t, phases[1:], WaitingForServer)
}
