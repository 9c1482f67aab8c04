package bridge

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
)

// The local chat engine's reply carries the numbers the engine measured:
// one token per token event, the time to the first token and the mean step.
func TestEngineChatReplyCarriesItsNumbers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.Preset, s.MaxTokens = dir, true, "laptop", 40
	c := NewEngineChat(s)
	defer c.Close()
	tokens, reasoned, answered := 0, false, false
	r, err := c.Turn(context.Background(), []chat.Message{{Role: "user", Content: "Tell me a saying about love."}}, s.ConvDefaults(),
		func(ev engine.Event) {
			switch ev.Kind {
			case engine.EventToken:
				tokens++
			case engine.EventReasoning:
				reasoned = true
			case engine.EventAnswer:
				answered = true
			}
		})
	require.NoError(t, err)
	require.NotNil(t, r.Stats)
	require.Greater(t, tokens, 1)
	assert.Equal(t, tokens, r.Stats.Tokens)
	assert.Positive(t, r.Stats.FirstTokenSeconds)
	assert.Positive(t, r.Stats.SecondsPerToken)
	if reasoned && answered {
		assert.Positive(t, r.Stats.ThoughtSeconds)
	} else {
		assert.Zero(t, r.Stats.ThoughtSeconds)
	}
}

// A server's reply carries the numbers the client measured: the server's
// token count (usage), the time to the first text, the rate after it, and
// how long the reply thought.
func TestRemoteChatReplyCarriesItsNumbers(t *testing.T) {
	const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",`
	delta := func(field, s string) string {
		return "data: " + head + `"choices":[{"index":0,"delta":{"` + field + `":"` + s + `"},"finish_reason":null}]}` + "\n\n"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, delta("reasoning_content", "Hmm."), delta("content", "Hello"), delta("content", " there"))
		fmt.Fprint(w, "data: "+head+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	s := DefaultSettings()
	s.Backend, s.ServerURL = BackendServer, srv.URL+"/v1"
	c, err := NewChatFor(s)
	require.NoError(t, err)
	defer c.Close()
	r, err := c.Turn(context.Background(), []chat.Message{{Role: "user", Content: "Hi"}}, s.ConvDefaults(), func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, "Hello there", r.Content)
	require.NotNil(t, r.Stats)
	assert.Equal(t, 7, r.Stats.Tokens, "the server's count")
	assert.Positive(t, r.Stats.FirstTokenSeconds)
	assert.Positive(t, r.Stats.ThoughtSeconds, "it thought before it answered")
}

// SetServer keeps a server's address as the app uses it, or refuses one
// that is not an address (and changes nothing then).
func TestSetServer(t *testing.T) {
	s := DefaultSettings()
	require.NoError(t, s.SetServer(" http://gpu-box:8000/ ", " sk-1 ", " m "))
	assert.Equal(t, BackendServer, s.Backend)
	assert.Equal(t, "http://gpu-box:8000/v1", s.ServerURL)
	assert.Equal(t, "sk-1", s.ServerKey)
	assert.Equal(t, "m", s.ServerModel)
	before := s
	assert.ErrorContains(t, s.SetServer("gpu-box", "", ""), "http://HOST:PORT/v1")
	assert.Equal(t, before, s)
	demo, trained := DemoIn(t.TempDir())
	assert.False(t, demo)
	assert.False(t, trained)
}
