package bridge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
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
	assert.Equal(t, "DEMO model (a tiny Kimi K3 trained on sayings) with draft model", info.Name)

	// a draft folder that is not one only costs the draft
	bad := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, MakeDemoModel(bad))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "draft", "config.json"), []byte("{}"), 0o644))
	c2 := NewEngineChat(Settings{ModelDir: bad, Demo: true, MaxTokens: 64}).(*engineChat)
	t.Cleanup(c2.Close)
	info, err = c2.Open(t.Context(), func(engine.Event) {})
	require.NoError(t, err)
	assert.Nil(t, c2.m.DraftModel())
	assert.Equal(t, "DEMO model (a tiny Kimi K3 trained on sayings)", info.Name)
}

// Tokens per pass: the first token from the prompt, then one per pass
// plus the drafts it accepted.
func TestTokensPerPass(t *testing.T) {
	assert.Equal(t, 2.5, Gauges{Tokens: 11, Drafted: 8, Accepted: 6}.TokensPerPass())
	assert.Equal(t, 1.0, Gauges{Tokens: 11, Drafted: 8}.TokensPerPass())
	assert.Equal(t, 0.0, Gauges{Tokens: 11}.TokensPerPass(), "no draft verified")
	assert.Equal(t, 0.0, Gauges{Tokens: 1, Drafted: 3}.TokensPerPass(), "no pass after the first token")
}
