package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
)

var tinyDraft = filepath.Join(tinyRelease, "draft")

// TestRunDraft: --draft drafts with the draft model, resident or streamed
// (--draft-stream); the ids are those of --spec off, and the report and
// --out say what was drafted and accepted, and what the streamed one read.
func TestRunDraft(t *testing.T) {
	p := readExpect(t).Prompts[0]
	out := filepath.Join(t.TempDir(), "run.json")
	reports := map[string]runReport{}
	for _, spec := range []string{"off", "3", "3 streamed"} {
		args := []string{"run", tinyRelease, "--ids", idsArg(p.PromptIDs), "--gen", "20", "--spec", strings.Fields(spec)[0], "--draft", tinyDraft, "--out", out, "--threads", "2"}
		if spec == "3 streamed" {
			args = append(args, "--draft-stream")
		}
		code, stdout, stderr := runK3(args...)
		require.Equal(t, ExitOK, code, "%s\n%s", stdout, stderr)
		switch spec {
		case "off":
			assert.NotContains(t, stdout, "draft model:", "--spec off does not load the draft model")
		case "3":
			assert.Contains(t, stdout, "draft model: "+tinyDraft+" (2 layers over target layers [1 5 7]")
			assert.Contains(t, stdout, "; resident)")
			assert.Contains(t, stdout, "draft model    ", "the plan counts it")
		default:
			assert.Contains(t, stdout, "draft model: "+tinyDraft+" (2 layers over target layers [1 5 7]")
			assert.Contains(t, stdout, "; streamed: ")
			assert.Contains(t, stdout, "(streamed: ", "the plan says so")
			assert.Contains(t, stdout, "draft model: streamed, ")
		}
		raw, err := os.ReadFile(out)
		require.NoError(t, err)
		var rep runReport
		require.NoError(t, json.Unmarshal(raw, &rep))
		reports[spec] = rep
	}
	off, d, sd := reports["off"], reports["3"], reports["3 streamed"]
	assert.Equal(t, off.GeneratedIDs, d.GeneratedIDs)
	assert.Equal(t, int64(0), off.SpecDrafted)
	assert.Positive(t, d.SpecDrafted)
	assert.Equal(t, 20-d.SpecAccepted, d.ForwardPasses)
	assert.Equal(t, off.GeneratedIDs, sd.GeneratedIDs)
	assert.Equal(t, d.SpecDrafted, sd.SpecDrafted, "the same drafts")
	assert.Equal(t, d.SpecAccepted, sd.SpecAccepted)
	assert.False(t, d.DraftStreamed)
	assert.Zero(t, d.DraftBytesRead)
	assert.True(t, sd.DraftStreamed)
	assert.Positive(t, sd.DraftBytesRead)
}

// TestRunDraftRefused: a draft model for another model, or without its
// config, is refused with exit 2 before any token; a damaged one with 1.
func TestRunDraftRefused(t *testing.T) {
	other := fixture.CopyDraft(t, tinyDraft, func(c map[string]any) {
		c["target_layer_ids"], c["num_target_layers"] = []int{1, 5, 11}, 3
	})
	damaged := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(damaged, "config.json"), []byte(`{"model_type": "k3_dspark"`), 0o644))
	short := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(short, "config.json"), []byte{}, 0o644))
	for _, c := range []struct {
		name, dir string
		code      int
		want      string
	}{
		{"another target", other, ExitUsage, "target_layer_ids[2] = 11 is beyond the model's 8 layers"},
		{"no config", t.TempDir(), ExitUsage, "has no config.json"},
		{"bad config", damaged, ExitUsage, "is refused"},
		{"empty config", short, ExitUsage, "is refused"},
	} {
		code, stdout, stderr := runK3("run", tinyRelease, "--ids", "1,2", "--gen", "4", "--draft", c.dir)
		assert.Equal(t, c.code, code, "%s: %s\n%s", c.name, stdout, stderr)
		assert.Contains(t, stderr, c.want, c.name)
		assert.NotContains(t, stdout, "prompt   :", c.name)
	}
	// the weights truncated: the file cannot be read (exit 1)
	trunc := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(trunc, "config.json"), mustRead(t, filepath.Join(tinyDraft, "config.json")), 0o644))
	w := mustRead(t, filepath.Join(tinyDraft, "model.safetensors"))
	require.NoError(t, os.WriteFile(filepath.Join(trunc, "model.safetensors"), w[:len(w)-64], 0o644))
	code, stdout, stderr := runK3("run", tinyRelease, "--ids", "1,2", "--gen", "4", "--draft", trunc)
	assert.Equal(t, ExitRuntime, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stderr, "draft model "+trunc)
	assert.NotContains(t, stdout, "prompt   :")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestDemoDraft: k3 demo writes the demo's draft model to DIR/draft; k3 run
// and k3 chat draft with it (the same ids as without) and say so.
func TestDemoDraft(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errs := runK3("demo", dir)
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	draft := filepath.Join(dir, "draft")
	assert.Contains(t, out, "--draft "+draft)
	o := filepath.Join(t.TempDir(), "run.json")
	var reps []runReport
	for _, spec := range []string{"off", "4"} {
		code, out, errs = runK3("run", dir, "--prompt", "Tell me a saying about love.", "--gen", "24", "--spec", spec, "--draft", draft, "--out", o)
		require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
		var rep runReport
		require.NoError(t, json.Unmarshal(mustRead(t, o), &rep))
		reps = append(reps, rep)
	}
	assert.Equal(t, reps[0].GeneratedIDs, reps[1].GeneratedIDs)
	assert.Positive(t, reps[1].SpecAccepted, "the trained draft model's drafts come true")

	stdin = strings.NewReader("hello\n/exit\n")
	defer func() { stdin = nil }()
	code, out, errs = runK3("chat", dir, "--gen", "8", "--draft", draft, "--spec", "3")
	require.Equal(t, ExitOK, code, "%s\n%s", out, errs)
	assert.Contains(t, out, "draft model: "+draft)
}

// TestServeDraftRefused: k3 serve refuses a draft model made for another
// model before it listens.
func TestServeDraftRefused(t *testing.T) {
	dir := demoModel(t)
	other := fixture.CopyDraft(t, tinyDraft, func(c map[string]any) { c["vocab_size"], c["draft_vocab_size"] = 1024, 1024 })
	code, out, errs := runK3("serve", dir, "--addr", "127.0.0.1:0", "--draft", other)
	assert.Equal(t, ExitUsage, code, "%s\n%s", out, errs)
	assert.Contains(t, errs, "the draft model does not fit this model")
	assert.Contains(t, errs, "vocab_size is 1024, the model's 512")
}
