package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/promptcache"
)

// TestMain keeps the package's runs out of the user's prompt cache: the
// tests that use one give --prompt-cache DIR.
func TestMain(m *testing.M) {
	os.Setenv(promptcache.Env, "off")
	os.Exit(m.Run())
}

// TestChatSecondProcessReusesTheSystemPrompt: a second k3 chat with the
// same system prompt and cache folder reads only the new tail, says how
// many positions it reused, and replies as a run without the cache; k3
// cache lists, sizes and clears what was saved.
func TestChatSecondProcessReusesTheSystemPrompt(t *testing.T) {
	dir := demoModel(t)
	cache := filepath.Join(t.TempDir(), "prompts")
	system := strings.Repeat("You answer in one short sentence and never ask questions back. ", 8)
	chatOnce := func(msg string, extra ...string) (string, int) {
		stdin = strings.NewReader(msg + "\n/exit\n")
		defer func() { stdin = nil }()
		args := append([]string{"chat", dir, "--gen", "5", "--greedy", "--no-think", "--system", system, "--chunk", "16"}, extra...)
		code, out, errs := runK3(args...)
		require.Equal(t, ExitOK, code, out+errs)
		m := regexp.MustCompile(`(\d+) prompt positions reused, (\d+) read`).FindStringSubmatch(out)
		require.NotNil(t, m, out)
		reused, _ := strconv.Atoi(m[1])
		return out, reused
	}
	_, first := chatOnce("Hello there.", "--prompt-cache", cache)
	assert.Zero(t, first)
	out, reused := chatOnce("What is the capital of France?", "--prompt-cache", cache)
	assert.Contains(t, out, "prompt cache: "+cache)
	assert.Greater(t, reused, 100, "the system block came from the cache:\n%s", out)
	plain, none := chatOnce("What is the capital of France?", "--prompt-cache", "off")
	assert.Zero(t, none)
	reply := func(s string) string {
		end := strings.Index(s, "prompt positions reused")
		start := strings.LastIndex(s[:end], "> ")
		r := s[start:strings.LastIndex(s[:end], "[")]
		return r[strings.Index(r, "\n")+1:] // after the progress line
	}
	assert.Equal(t, reply(plain), reply(out), "the same reply with the cache off")
	assert.NotEmpty(t, strings.TrimSpace(reply(out)))

	code, list, _ := runK3("cache", "list", "--prompt-cache", cache)
	require.Equal(t, ExitOK, code)
	n := len(promptcache.Files(cache))
	require.Positive(t, n)
	assert.Contains(t, list, strconv.Itoa(n)+" saved prompt states")
	code, size, _ := runK3("cache", "size", "--prompt-cache", cache)
	require.Equal(t, ExitOK, code)
	assert.Contains(t, size, strconv.Itoa(n)+" saved prompt states")
	code, cleared, _ := runK3("cache", "clear", "--prompt-cache", cache)
	require.Equal(t, ExitOK, code)
	assert.Contains(t, cleared, "cleared "+strconv.Itoa(n)+" saved prompt states")
	assert.Empty(t, promptcache.Files(cache))
	code, _, errs := runK3("cache", "prune", "--prompt-cache", cache)
	assert.Equal(t, ExitUsage, code, errs)
}

// TestRunReusesThePromptCache: a second k3 run over a prompt that extends
// the first reads only the new positions and generates the same tokens.
func TestRunReusesThePromptCache(t *testing.T) {
	ex := readExpect(t)
	ids := ex.Prompts[1].FullIDs
	cache := t.TempDir()
	code, out, errs := runK3("run", tinyRelease, "--ids", idsArg(ids[:20]), "--gen", "2", "--prompt-cache", cache, "--chunk", "8")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "prompt cache: reused 0 of 20 prompt positions, read 20")
	gen := func(cacheArg string) []int {
		outJSON := filepath.Join(t.TempDir(), "r.json")
		code, out, errs := runK3("run", tinyRelease, "--ids", idsArg(ids), "--gen", "3", "--prompt-cache", cacheArg, "--chunk", "8", "--out", outJSON)
		require.Equal(t, ExitOK, code, out+errs)
		if cacheArg != "off" {
			assert.Contains(t, out, "prompt cache: reused 20 of "+itoa(len(ids)))
		}
		raw, err := os.ReadFile(outJSON)
		require.NoError(t, err)
		var r struct {
			Gen []int `json:"generated_ids"`
		}
		require.NoError(t, json.Unmarshal(raw, &r))
		require.Len(t, r.Gen, 3)
		return r.Gen
	}
	assert.Equal(t, gen("off"), gen(cache))
}

// TestPromptCacheFolderNotWritable: a default folder that cannot be made
// turns the cache off with a warning; one given with --prompt-cache is a
// usage error.
func TestPromptCacheFolderNotWritable(t *testing.T) {
	ids := readExpect(t).Prompts[0].PromptIDs
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	t.Setenv(promptcache.Env, filepath.Join(file, "prompts"))
	code, out, errs := runK3("run", tinyRelease, "--ids", idsArg(ids), "--gen", "1")
	assert.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, errs, "the prompt cache is off")
	code, _, errs = runK3("run", tinyRelease, "--ids", idsArg(ids), "--gen", "1", "--prompt-cache", filepath.Join(file, "prompts"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "--prompt-cache")
}
