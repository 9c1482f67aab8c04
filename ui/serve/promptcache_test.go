package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/promptcache"
)

// agentSystem is an agent-like system prompt: long, the same every request.
var agentSystem = strings.Repeat("You are a coding agent. Use the tools to read and edit files; answer briefly. ", 12)

func agentTurn(msgs ...string) map[string]any {
	m := []map[string]any{{"role": "system", "content": agentSystem}}
	for i, s := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m = append(m, map[string]any{"role": role, "content": s})
	}
	return map[string]any{"messages": m, "max_tokens": 3, "reasoning_effort": "none"}
}

func cacheOf(t *testing.T, e *engine.Engine, dir string) *promptcache.Cache {
	t.Helper()
	c, err := promptcache.Open(e.Model(), promptcache.Options{Dir: dir, RAMBytes: 1 << 30, DiskBytes: 1 << 30})
	require.NoError(t, err)
	return c
}

// TestServeSideRequestKeepsTheConversation: with a prompt cache, a side
// request in between (a title request) does not cost the conversation its
// prefix, a shorter replay reuses the longest snapshot inside it, and a
// new server on the same folder (a restart) reads only the new tail; the
// replies equal a server without the cache.
func TestServeSideRequestKeepsTheConversation(t *testing.T) {
	dir := t.TempDir()
	var pc *promptcache.Cache
	s, e, _ := start(t, func(o *Options) {
		e := o.Engine
		pc = cacheOf(t, e, dir)
		o.PromptCache = pc
	})
	plain, _, _ := start(t, nil)
	ask := func(s *Server, body map[string]any) chatResp {
		resp, data := post(t, s, "/v1/chat/completions", body)
		require.Equal(t, 200, resp.StatusCode, string(data))
		return decodeChat(t, data)
	}
	first := ask(s, agentTurn("List the files."))
	assert.Zero(t, first.Usage.PromptTokensDetails.CachedTokens)
	ask(s, map[string]any{"messages": []map[string]any{{"role": "user", "content": "Write a title for: list the files"}}, "max_tokens": 2})
	next := agentTurn("List the files.", "main.go and go.mod", "Open main.go.")
	got := ask(s, next)
	shared := first.Usage.PromptTokens - 1
	assert.GreaterOrEqual(t, got.Usage.PromptTokensDetails.CachedTokens, shared*9/10, "the second request after a side request")
	assert.Equal(t, ask(plain, next).Choices[0].Message, got.Choices[0].Message)

	short := ask(s, agentTurn("List the files.", "main.go and go.mod", "Open it."))
	assert.GreaterOrEqual(t, short.Usage.PromptTokensDetails.CachedTokens, shared*9/10, "a shorter replay")

	// a restart: a new server and cache on the same folder
	again, _, _ := start(t, func(o *Options) { o.PromptCache = cacheOf(t, o.Engine, dir) })
	later := ask(again, next)
	assert.GreaterOrEqual(t, later.Usage.PromptTokensDetails.CachedTokens, got.Usage.PromptTokens*9/10, "after a restart")
	assert.Equal(t, got.Choices[0].Message, later.Choices[0].Message)
	_ = e
}

// TestServePromptCachePartitions: a request with another prompt_cache_key
// (or Messages metadata.user_id) reuses nothing of the first's prompt,
// not even the kept state, so it cannot time a guess of it; the same key
// reuses it, and Responses and Messages report it.
func TestServePromptCachePartitions(t *testing.T) {
	s, _, _ := start(t, func(o *Options) { o.PromptCache = cacheOf(t, o.Engine, "") })
	body := func(key string) map[string]any {
		b := agentTurn("My password is hunter2. Tell me a saying.")
		b["prompt_cache_key"] = key
		return b
	}
	_, data := post(t, s, "/v1/chat/completions", body("alice"))
	assert.Zero(t, decodeChat(t, data).Usage.PromptTokensDetails.CachedTokens)
	before := s.Stats().Reused
	_, data = post(t, s, "/v1/chat/completions", body("mallory"))
	assert.Zero(t, decodeChat(t, data).Usage.PromptTokensDetails.CachedTokens)
	assert.Equal(t, before, s.Stats().Reused, "nothing was reused for another partition")
	_, data = post(t, s, "/v1/chat/completions", body("alice"))
	assert.Positive(t, decodeChat(t, data).Usage.PromptTokensDetails.CachedTokens)

	resp := map[string]any{"instructions": agentSystem, "input": "Tell me a saying.", "max_output_tokens": 2, "prompt_cache_key": "bob"}
	post(t, s, "/v1/responses", resp)
	_, data = post(t, s, "/v1/responses", resp)
	assert.Contains(t, string(data), `"input_tokens_details":{"cached_tokens":`)
	assert.NotContains(t, string(data), `"cached_tokens":0`)
	msg := map[string]any{"system": agentSystem, "messages": []map[string]any{{"role": "user", "content": "Tell me a saying."}}, "max_tokens": 2,
		"metadata": map[string]any{"user_id": "carol"}}
	post(t, s, "/v1/messages", msg)
	_, data = post(t, s, "/v1/messages", msg)
	assert.NotContains(t, string(data), `"cache_read_input_tokens":0`)
	before = s.Stats().Reused
	msg["metadata"] = map[string]any{"user_id": "dave"}
	_, data = post(t, s, "/v1/messages", msg)
	assert.Contains(t, string(data), `"cache_read_input_tokens":0`)
	assert.Equal(t, before, s.Stats().Reused)
}
