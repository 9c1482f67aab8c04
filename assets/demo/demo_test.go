package demo_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/assets/demo"
	"k3/engine"
	"k3/engine/chat"
	"k3/internal/demomodel"
	"k3/tokenizer"
)

func write(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, demo.Write(dir))
	return dir
}

// TestWrite: the folder holds the checkpoint, the tokenizer and the marker,
// the engine opens it and the tokenizer is a K3 chat vocabulary whose size is
// the model's.
func TestWrite(t *testing.T) {
	dir := write(t)
	var total int64
	for _, name := range append(demo.Names(), demo.Marker) {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		total += fi.Size()
	}
	assert.Equal(t, demo.Size(), total)
	assert.Contains(t, demo.Names(), "model.safetensors.index.json")
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	require.NoError(t, tok.CheckChat())
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, tok.VocabSize(), m.Cfg.VocabSize)
	t.Logf("demo model: %d bytes, %d layers, vocabulary %d", total, m.Cfg.Layers, tok.VocabSize())
}

var word = regexp.MustCompile(`[A-Za-z]+(?:'[A-Za-z]+)*`)

// dictionary reads /usr/share/dict/words (Debian's wamerican).
func dictionary(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("/usr/share/dict/words")
	if err != nil {
		t.Skipf("no dictionary (%v): install Debian's wamerican (apt-get install wamerican)", err)
	}
	defer f.Close()
	d := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		d[strings.TrimSpace(sc.Text())] = true
	}
	require.NoError(t, sc.Err())
	return d
}

// TestChatReplies: greedy replies with the default chat options end by
// themselves (<|end_of_msg|>) within the default reply cap, have a thinking
// and a response section, and at least 80% of the words of the responses
// are dictionary words.
func TestChatReplies(t *testing.T) {
	dict := dictionary(t)
	dir := write(t)
	e, tok := demomodel.Open(t, dir, 2)
	eom, ok := tok.SpecialID(tokenizer.EndOfMsg)
	require.True(t, ok)
	known, all := 0, 0
	for _, user := range []string{"Hello!", "Tell me a saying about love.", "Do you know a saying about work?",
		"Give me a fortune about time.", "Who are you?"} {
		s := chat.NewSession(e, tok)
		r, err := s.Turn(context.Background(), user, chat.Options{Thinking: true, Sampling: engine.Sampling{Greedy: true}}, nil)
		require.NoError(t, err)
		require.Equal(t, engine.StopToken, r.Stop, "%q: the reply did not end by itself", user)
		require.Equal(t, eom, r.IDs[len(r.IDs)-1], "%q", user)
		assert.Less(t, len(r.IDs), chat.DefaultMaxTokens)
		assert.Equal(t, chat.Cut(""), r.Cut())
		assert.NotEmpty(t, strings.TrimSpace(r.Reasoning), "%q: no thinking", user)
		assert.NotEmpty(t, strings.TrimSpace(r.Content), "%q: no response", user)
		n := 0
		ws := word.FindAllString(r.Content, -1)
		for _, w := range ws {
			if dict[w] || dict[strings.ToLower(w)] {
				n++
			}
		}
		known += n
		all += len(ws)
		t.Logf("%q -> %d tokens; thinking %q; response %q (%d/%d dictionary words)", user, len(r.IDs), r.Reasoning, r.Content, n, len(ws))
	}
	require.Positive(t, all)
	ratio := float64(known) / float64(all)
	t.Logf("dictionary words in the responses: %d/%d = %.3f", known, all, ratio)
	assert.GreaterOrEqual(t, ratio, 0.8)
}

// TestWriteDraft: the demo folder holds the demo model's draft model, which
// the engine attaches to the demo model, and speculative decoding with it
// generates plain decoding's tokens; the embedded draft model is the one
// tools/demo/train_draft.py wrote to testdata/models/demo/draft (when that
// is present).
func TestWriteDraft(t *testing.T) {
	dir := write(t)
	draft := filepath.Join(dir, demo.DraftDir)
	for _, name := range []string{"config.json", "model.safetensors"} {
		got, err := os.ReadFile(filepath.Join(draft, name))
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", "demo", "draft", name))
		if err == nil {
			assert.Equal(t, want, got, "assets/demo/draft/%s differs from testdata/models/demo/draft/%s: copy the trained one", name, name)
		}
	}
	tok, err := tokenizer.Load(dir)
	require.NoError(t, err)
	plain, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}})
	require.NoError(t, err)
	defer plain.Close()
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 62}, Draft: draft})
	require.NoError(t, err)
	defer m.Close()
	ids, err := chat.NewSession(plain.NewEngine(1), tok).Prompt("Tell me a saying about love.", chat.Options{Thinking: true})
	require.NoError(t, err)
	gen := func(m *engine.Model, spec engine.Spec) *engine.GenResult {
		e := m.NewEngine(2)
		defer e.Close()
		r, err := e.Generate(context.Background(), nil, ids, engine.GenOptions{MaxTokens: 40, StopIDs: tok.StopIDs(), Spec: spec})
		require.NoError(t, err)
		return r
	}
	off, d := gen(plain, engine.SpecOff), gen(m, 4)
	assert.Equal(t, off.Generated, d.Generated)
	assert.Positive(t, d.Stats.SpecAccepted, "the trained draft model's drafts come true")
	t.Logf("demo draft model: %d of %d drafted tokens accepted, %d passes for %d tokens", d.Stats.SpecAccepted, d.Stats.SpecDrafted, d.DecodePasses, len(d.Generated))
}
