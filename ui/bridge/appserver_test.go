package bridge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/plan"
	"k3/ui/serve"
)

// G13: while the app's server answers a request, the window hears of it:
// the request's number as a phase, where the reading of its prompt is
// when it takes more than one pass, the engine's counters and each token
// with its step time while it runs (not the reply's text), an empty phase
// when it ends; the count of requests answered.
func TestServerRequestsReachTheWindow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 8
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var seen []engine.Event
	answering := 0 // events seen while Answering
	c.WatchServer(func(ev engine.Event) {
		mu.Lock()
		seen = append(seen, ev)
		if c.Answering() {
			answering++
		}
		mu.Unlock()
	})
	url, err := c.StartServer(t.Context(), "127.0.0.1:0", "", func(engine.Event) {})
	require.NoError(t, err)
	assert.Equal(t, int64(0), c.ServedRequests())
	completion := 0
	for range 2 {
		resp, err := http.Post(url+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"k3-demo","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}`))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var r openaiReply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		resp.Body.Close()
		completion += r.Usage.CompletionTokens
	}
	assert.Equal(t, int64(2), c.ServedRequests())
	assert.False(t, c.Answering(), "no request holds the engine")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, len(seen), answering, "every event comes while the request holds the engine")
	var groups [][]string // each request's phases, up to its ""
	stats, tokens := 0, 0
	cur := []string{}
	for _, ev := range seen {
		switch ev.Kind {
		case engine.EventPhase:
			if ev.Text == "" {
				groups, cur = append(groups, cur), []string{}
				continue
			}
			cur = append(cur, ev.Text)
		case engine.EventStats:
			stats++
			assert.Greater(t, ev.Stats.RSSBytes, int64(0))
		case engine.EventToken:
			tokens++
			assert.Positive(t, ev.Seconds, "each token's step time")
		case engine.EventPrefill:
			assert.LessOrEqual(t, ev.Done, ev.Total)
		default:
			t.Errorf("the reply's text went to the window: %v %q", ev.Kind, ev.Text)
		}
	}
	require.Len(t, groups, 2)
	assert.Empty(t, cur, "each request ends with an empty phase")
	reading := 0
	for i, g := range groups {
		n := int64(i + 1)
		require.NotEmpty(t, g)
		assert.Equal(t, AnsweringPhase(n), g[0])
		for _, p := range g[1:] {
			if p != AnsweringPhase(n) {
				assert.True(t, strings.HasPrefix(p, ServedReadingPhase(n, "reading prompt ")), p)
				reading++
			}
		}
	}
	assert.Positive(t, reading, "the first prompt is read in two passes (the preamble, then the rest): the status says where it is")
	assert.Equal(t, completion, tokens, "every token the requests generated, with its step time")
	assert.GreaterOrEqual(t, stats, 4, "the counters at each request's start and end")
	assert.Contains(t, AnsweringPhase(1), "answering a request from another program")
}

// The app's server accepts what `k3 serve` accepts by default
// (serve.DefaultContext), not the 4,096 positions the app plans for its
// conversations: a longer request grows the plan by plan.ContextStep
// positions, its KV cache checked against the memory available then; one
// that cannot fit is refused once, naming the limit, and the server goes
// on; one past the context is refused naming it.
func TestAppServerGrowsItsContext(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 8
	c := NewEngineChat(s).(*engineChat)
	t.Cleanup(c.Close)
	url, err := c.StartServer(t.Context(), "127.0.0.1:0", "", func(engine.Event) {})
	require.NoError(t, err)
	require.Equal(t, ContextPositions, c.planned, "the plan the app opened")
	opened := c.PlanBytes()
	require.Positive(t, opened)
	ask := func(words int) (int, openaiReply) {
		body, err := json.Marshal(map[string]any{"model": "k3-demo", "max_tokens": 4,
			"messages": []map[string]string{{"role": "user", "content": strings.Repeat("a wise man sees more ", words)}}})
		require.NoError(t, err)
		resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var r openaiReply
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		return resp.StatusCode, r
	}
	n := 850 // about 5 positions a phrase: over 4,096 positions
	positions := func(s string) int { return len(c.tok.Encode(s)) }
	require.Greater(t, positions(strings.Repeat("a wise man sees more ", n)), ContextPositions)

	c.readMemory = func() (plan.Memory, error) { return plan.Memory{TotalBytes: 1 << 30, AvailableBytes: 1 << 10}, nil }
	code, r := ask(n)
	require.Equal(t, http.StatusBadRequest, code, "1 KB available: the KV cache cannot grow")
	require.NotNil(t, r.Error)
	assert.Equal(t, "context_length_exceeded", r.Error.Code)
	assert.Contains(t, r.Error.Message, fmt.Sprintf("than the %d positions planned", ContextPositions))
	assert.Contains(t, r.Error.Message, "of memory is available")
	assert.Equal(t, ContextPositions, c.planned)
	assert.Equal(t, opened, c.PlanBytes())

	c.readMemory = nil // the machine's memory
	code, r = ask(n)
	require.Equal(t, http.StatusOK, code, "%+v", r.Error)
	assert.Greater(t, r.Usage.PromptTokens, ContextPositions)
	assert.Positive(t, r.Usage.CompletionTokens)
	assert.Equal(t, 2*plan.ContextStep, c.planned, "grown by one step")
	g, err := plan.Grow(c.m.Cfg, c.m.Bound, c.opened.StateCopies, ContextPositions, ContextPositions+1, nil)
	require.NoError(t, err)
	require.Positive(t, g.More)
	assert.Equal(t, opened+g.More, c.PlanBytes(), "the panel's plan counts the KV cache it grew by")

	code, r = ask(4000) // about 20,000 positions
	require.Equal(t, http.StatusBadRequest, code)
	require.NotNil(t, r.Error)
	assert.Equal(t, "context_length_exceeded", r.Error.Code)
	assert.Contains(t, r.Error.Message, fmt.Sprintf("this server's context is %d", serve.DefaultContext))
	assert.Equal(t, 16384, serve.DefaultContext, "what `k3 serve` plans by default")
}

// openaiReply is what the tests read of a chat completion.
type openaiReply struct {
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// A request the app's server answers says what reading its prompt takes
// from the request's start, before the first pass is read (at K3 size a
// pass takes minutes), as a turn of the app's own does: the first phase
// after the request's number is "reading prompt 0/N (P passes)", sent
// before any position was read.
func TestServedPromptSaysItsReadingFromTheStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(dir))
	s := DefaultSettings()
	s.ModelDir, s.Demo, s.MaxTokens = dir, true, 4
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
	body, err := json.Marshal(map[string]any{"model": "k3-demo", "max_tokens": 2,
		"messages": []map[string]string{{"role": "user", "content": strings.Repeat("a wise man sees more ", 40)}}})
	require.NoError(t, err)
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	// a request with a picture says what the tower does too
	img := image.NewRGBA(image.Rect(0, 0, 56, 56))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{200, 120, 40, 255}}, image.Point{}, draw.Src)
	draw.Draw(img, image.Rect(10, 10, 40, 30), &image.Uniform{color.RGBA{20, 60, 220, 255}}, image.Point{}, draw.Src)
	var pic bytes.Buffer
	require.NoError(t, png.Encode(&pic, img))
	body, err = json.Marshal(map[string]any{"model": "k3-demo", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "Look: "},
		{"type": "image_url", "image_url": map[string]string{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic.Bytes())}}}}}})
	require.NoError(t, err)
	resp, err = http.Post(url+"/chat/completions", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	looking := 0
	for _, ev := range seen {
		if ev.Kind == engine.EventPhase && strings.HasPrefix(ev.Text, ServedReadingPhase(2, "looking at the picture 1/1")) {
			looking++
		}
	}
	assert.Positive(t, looking, "the tower's progress on the request's picture")
	var phases []string
	read := -1 // the first phase after a position was read
	var total, chunk int
	for _, ev := range seen {
		switch {
		case ev.Kind == engine.EventPhase:
			phases = append(phases, ev.Text)
		case ev.Kind == engine.EventPrefill && ev.Done == 0 && total == 0:
			total, chunk = ev.Total, ev.Chunk
		case ev.Kind == engine.EventPrefill && read < 0:
			read = len(phases)
		}
	}
	require.Positive(t, chunk, "the first prefill event says the positions a pass reads")
	require.Less(t, total, chunk, "the demo reads the prompt in one pass")
	require.GreaterOrEqual(t, read, 2)
	assert.Equal(t, []string{AnsweringPhase(1), ServedReadingPhase(1, fmt.Sprintf("reading prompt 0/%d (1 pass)", total))}, phases[:2],
		"before the first pass was read")
}
