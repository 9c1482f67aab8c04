package remote

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// hostile serves the body write gives for every chat request.
func hostile(t *testing.T, ctype string, write func(w http.ResponseWriter, r *http.Request)) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		write(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "", "m")
	require.NoError(t, err)
	return c
}

func text(s string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, s) }
}

func content(s string) string {
	return "data: " + head + `"choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}` + "\n\n"
}

const finishStop = "data: " + head + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"

var user = []chat.Message{{Role: "user", Content: "x"}}

// TestHostileStreams: each misbehaving stream is an error that says what
// the server did wrong, or is read as the standard says (was: an empty
// reply accepted as complete; unbounded memory).
func TestHostileStreams(t *testing.T) {
	// R6: no data: events at all, then [DONE]
	c := hostile(t, "text/event-stream", text("{\"choices\":[]}\nevent: x\nid: 1\nretry: 5\n\ndata: [DONE]\n\n"))
	r, err := c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, `held no events (no "data: {...}" lines`)
	assert.Equal(t, chat.CutStopped, r.Message.Cut)

	// R2: an HTML page
	c = hostile(t, "text/html", text("<html><body>Welcome</body></html>"))
	_, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "it was text/html")

	// [DONE] with chunks but neither text nor a finish reason
	c = hostile(t, "text/event-stream", text("data: "+head+`"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\ndata: [DONE]\n\n"))
	_, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "no reply text, no tool call and no finish reason")

	// R7: a UTF-8 BOM before the first event is ignored
	c = hostile(t, "text/event-stream", text("\ufeff"+content("Hello")+finishStop+"data: [DONE]\n\n"))
	r, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hello", r.Message.Content)

	// R5/R14: an event over two data: lines, CR-only line ends
	c = hostile(t, "text/event-stream", text(strings.ReplaceAll("data: "+head+"\ndata: "+`"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n", "\n", "\r")))
	r, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, "Hi", r.Message.Content)

	// R18: one line past 4 MiB
	c = hostile(t, "text/event-stream", text("data: "+strings.Repeat("x", 5<<20)+"\n\n"))
	_, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "a line longer than 4 MiB")
}

// endless streams content deltas until the client goes away.
func endless(w http.ResponseWriter, r *http.Request) {
	for r.Context().Err() == nil {
		if _, err := fmt.Fprint(w, content(strings.Repeat("a", 1000))); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// TestEndlessStreamCut: R17, a stream that never ends stops at the
// max_tokens asked for, or at the reply cap when none was asked.
func TestEndlessStreamCut(t *testing.T) {
	c := hostile(t, "text/event-stream", endless)
	r, err := c.Turn(context.Background(), user, chat.Options{Thinking: true, MaxTokens: 10}, nil)
	assert.ErrorContains(t, err, "more than the 10 tokens asked for")
	assert.Equal(t, chat.CutTurnCap, r.Message.Cut)
	assert.Equal(t, 10+tokenSlack, r.Deltas)
	assert.Equal(t, (10+tokenSlack)*1000, len(r.Message.Content))

	c.MaxReplyBytes = 1 << 20
	r, err = c.Turn(context.Background(), user, chat.Options{Thinking: true}, nil)
	assert.ErrorContains(t, err, "more than 1 MB of reply")
	assert.LessOrEqual(t, len(r.Message.Content), 1<<20)
}
