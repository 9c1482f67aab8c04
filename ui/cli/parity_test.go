package cli

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/internal/fixture"
	"k3/storage/direct"
	"k3/storage/strictjson"
	"k3/tokenizer"
	"k3/tokenizer/xtml"
)

// partialSet copies tiny-release without its second shard (layers 3 to 6;
// the first holds layers 0-3, the third layers 6-7 and the model tables):
// what `k3 download --layers 3` leaves, the full index kept.
func partialSet(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.CopyFS(dir, os.DirFS(tinyRelease)))
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors")))
	return dir
}

func readRunReport(t *testing.T, path string) runReport {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var rep runReport
	require.NoError(t, json.Unmarshal(raw, &rep))
	return rep
}

func TestPartialShardSetRunsAndPacks(t *testing.T) {
	dir := partialSet(t)
	tmp := t.TempDir()
	ids := "491,109,188,458,164"

	// the full set's first 3 layers give the reference for the partial set
	full := filepath.Join(tmp, "full.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "4", "--layers", "3", "--out", full)
	require.Equal(t, ExitOK, code, out+errs)
	part := filepath.Join(tmp, "part.json")
	code, out, errs = runK3("run", dir, "--ids", ids, "--gen", "4", "--layers", "3", "--out", part)
	require.Equal(t, ExitOK, code, out+errs)
	want, got := readRunReport(t, full), readRunReport(t, part)
	assert.Equal(t, want.GeneratedIDs, got.GeneratedIDs)
	assert.Len(t, got.GeneratedIDs, 4)
	assert.Equal(t, 3, got.Layers)

	// layer 3 lives partly in the missing shard
	code, _, errs = runK3("run", dir, "--ids", ids, "--layers", "4")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "shard model-00002-of-00003.safetensors is missing: layer 3 needs language_model.model.layers.3.")
	assert.Contains(t, errs, "(--layers 4 asked; the shards present cover --layers 3)")
	code, _, errs = runK3("run", dir, "--ids", ids)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "layer 3 needs")

	// pack: the first 3 layers pack and run from the trunk, same tokens
	tr := filepath.Join(tmp, "trunk")
	code, out, errs = runK3("pack", dir, tr, "--layers", "3", "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "(embed, head, final, 3 layers)")
	assert.Contains(t, out, "--layers 3 --prompt")
	fromTrunk := filepath.Join(tmp, "trunk.json")
	code, out, errs = runK3("run", dir, "--ids", ids, "--gen", "4", "--layers", "3", "--trunk", tr, "--trunk-gb", "0.0001", "--out", fromTrunk)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, want.GeneratedIDs, readRunReport(t, fromTrunk).GeneratedIDs)
	code, _, errs = runK3("pack", dir, filepath.Join(tmp, "t2"), "--disk-test-mb", "0", "--quiet")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "k3 pack: shard model-00002-of-00003.safetensors is missing: layer 3 needs")

	// the model tables' shard missing: nothing can run
	require.NoError(t, os.Remove(filepath.Join(dir, "model-00003-of-00003.safetensors")))
	code, _, errs = runK3("run", dir, "--ids", ids, "--layers", "1")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "shard model-00003-of-00003.safetensors is missing: it holds language_model.")
	assert.Contains(t, errs, "which every run needs")
}

func TestCSpellings(t *testing.T) {
	ids := "491,109,188,458,164"
	// --incremental: a no-op with a note; same tokens as without it
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a.json"), filepath.Join(tmp, "b.json")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "3", "--incremental", "--out", a)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, errs, "note: --incremental is how k3 always runs")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "3", "--out", b)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, readRunReport(t, b).GeneratedIDs, readRunReport(t, a).GeneratedIDs)

	// --tf-check is --teacher-forcing, with the agreement line
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--tf-check")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "teacher forcing: 5 positions; the argmax matches the next id at ")

	// --trunk-gb auto is --preset auto
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--trunk-gb", "auto")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "auto: preset ")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--trunk-gb=auto")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "auto: preset ")

	// --version and --list-presets after a command
	code, out, _ = runK3("run", tinyRelease, "--ids", ids, "--version")
	assert.Equal(t, ExitOK, code)
	assert.Equal(t, "k3 "+Version+"\n", out)
	code, out, _ = runK3("chat", tinyRelease, "--list-presets")
	assert.Equal(t, ExitOK, code)
	assert.Contains(t, out, "laptop")

	// an unknown flag: one line naming the closest known flag
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--recompte")
	assert.Equal(t, ExitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "k3 run: unknown flag --recompte; the closest is --recompute (k3 run -h lists them all)\n", errs)
	code, _, errs = runK3("pack", tinyRelease, t.TempDir(), "-compres")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 pack: unknown flag -compres; the closest is --compress (k3 pack -h lists them all)\n", errs)
	// another program's name for the reply cap names k3's (edit distance
	// would name --layers)
	code, _, errs = runK3("chat", tinyRelease, "--max-tokens", "8")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 chat: unknown flag --max-tokens; the closest is --gen (k3 chat -h lists them all)\n", errs)
	// --incremental means nothing to pack: unknown there
	code, _, errs = runK3("pack", tinyRelease, t.TempDir(), "--incremental")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "unknown flag --incremental")
}

// TestCCommandLine: the C engine's command lines run. The model folder as
// the first word runs k3 run (said once on stderr), --chat runs k3 chat,
// and --draft-trunk is answered with k3's way of drafting.
func TestCCommandLine(t *testing.T) {
	ids := "491,109,188,458,164"
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a.json"), filepath.Join(tmp, "b.json")
	code, out, errs := runK3(tinyRelease, "--ids", ids, "--gen", "2", "--out", a)
	require.Equal(t, ExitOK, code, out+errs)
	assert.Equal(t, 1, strings.Count(errs, "note: "+tinyRelease+" is a model folder: running it as 'k3 run "+tinyRelease+" ...'"), errs)
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "2", "--out", b)
	require.Equal(t, ExitOK, code, out+errs)
	assert.NotContains(t, errs, "model folder")
	assert.Equal(t, readRunReport(t, b).GeneratedIDs, readRunReport(t, a).GeneratedIDs)

	// --chat: k3 chat's own checks answer (its flag, not run's)
	for _, args := range [][]string{
		{tinyRelease, "--chat", "--thinking-effort", "medium"},
		{"run", tinyRelease, "--chat", "--thinking-effort", "medium"},
	} {
		code, _, errs = runK3(args...)
		assert.Equal(t, ExitUsage, code)
		assert.Contains(t, errs, "k3 chat: --thinking-effort \"medium\" is not one of", args)
		assert.NotContains(t, errs, "unknown flag", args)
	}
	code, _, errs = runK3(tinyRelease, "--chat", "--incremental", "--thinking-effort", "medium")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "note: --incremental is how k3 chat always runs")

	// not a model folder: still an unknown command
	code, _, errs = runK3(t.TempDir(), "--ids", "1")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "unknown command")

	// the C engine's draft trunk: one line naming k3's draft model
	for _, f := range []string{"--draft-trunk", "--draft-trunk-gb"} {
		code, out, errs = runK3("run", tinyRelease, "--ids", ids, f, "6")
		assert.Equal(t, ExitUsage, code)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(errs, "\n"), errs)
		assert.Contains(t, errs, "k3 run: "+f+" is the C engine's draft made from the model's own trunk; k3 drafts with a draft model instead: --draft DIR")
	}
}

// TestFlagHints: the hint for an unknown flag weighs every accepted
// spelling (the C aliases too) and names none of another meaning.
func TestFlagHints(t *testing.T) {
	for _, c := range []struct{ cmd, flag, want string }{
		{"run", "--incremetal", "; the closest is --incremental (k3 run -h lists them all)"},
		{"run", "--tf-chek", "; the closest is --tf-check (k3 run -h lists them all)"},
		{"run", "--recompte", "; the closest is --recompute (k3 run -h lists them all)"},
		{"run", "--bogus", " (k3 run -h lists them all)"},
		{"chat", "--chta", " (k3 chat -h lists them all)"},
		{"serve", "--chat", " (k3 serve -h lists them all)"},
	} {
		code, _, errs := runK3(c.cmd, tinyRelease, c.flag)
		assert.Equal(t, ExitUsage, code, c.flag)
		assert.Equal(t, "k3 "+c.cmd+": unknown flag "+c.flag+c.want+"\n", errs)
	}
}

func TestEditDistance(t *testing.T) {
	assert.Equal(t, 0, editDistance("gen", "gen"))
	assert.Equal(t, 1, editDistance("recompte", "recompute"))
	assert.Equal(t, 3, editDistance("kitten", "sitting"))
	assert.Equal(t, 4, editDistance("", "tok4"))
}

func TestVerifyLogits(t *testing.T) {
	g := func(name string) string { return fixture.Path("golden", name) }
	// goldens written by the float64 reference (tools/reference/make_golden.py)
	for _, c := range []struct{ model, golden string }{
		{tinyRelease, "tiny-release"},
		{tinyFlatF32, "tiny-flat-f32"},
	} {
		code, out, errs := runK3("verify", c.model, "--logits", "--golden", g(c.golden))
		require.Equal(t, ExitOK, code, out+errs)
		assert.Contains(t, out, "position 4 (after id 7): worst |diff| ")
		assert.Contains(t, out, "MATCH: ")
	}
	// --layers: a golden of the first 3 layers, on the partial set too
	code, out, errs := runK3("verify", partialSet(t), "--logits", "--layers", "3", "--ids", "3,4,5,6,7", "--golden", g("tiny-release-layers3"))
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "MATCH: ")
	// a golden of another layer count, or other ids: refused
	code, _, errs = runK3("verify", tinyRelease, "--logits", "--golden", g("tiny-release-layers3"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "is for 3 layers, this run binds 8")
	code, _, errs = runK3("verify", tinyRelease, "--logits", "--ids", "1,2", "--golden", g("tiny-release"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "holds the logits for ids 3,4,5,6,7, not 1,2")
	// the other model's golden: another vocabulary
	code, _, errs = runK3("verify", tinyRelease, "--logits", "--golden", g("tiny-flat-f32"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "the model's vocabulary is 512")
	// one logit moved by 1% of the largest: mismatch, exit 1
	gd, err := readGolden(g("tiny-release"))
	require.NoError(t, err)
	cmp := compareLogits(gd.logits, gd.logits)
	gd.LogitsBits[5] = math.Float32bits(gd.logits[5] + float32(0.01*cmp.MaxRef))
	bad := t.TempDir()
	b, err := json.Marshal(gd)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bad, GoldenFile), b, 0o644))
	code, out, _ = runK3("verify", tinyRelease, "--logits", "--golden", bad)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, out, "at id 5,")
	assert.Contains(t, out, "MISMATCH: ")
}

// TestVerifyRefusesBadGolden: a golden with a NaN (or infinite) logit, or
// whose argmax is not its logits' largest, is refused as a bad golden (exit
// 2) before the model runs; a NaN used to read as the model's mismatch.
func TestVerifyRefusesBadGolden(t *testing.T) {
	write := func(edit func(g *golden)) string {
		g, err := readGolden(fixture.Path("golden", "tiny-release"))
		require.NoError(t, err)
		edit(g)
		dir := t.TempDir()
		b, err := json.Marshal(g)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, GoldenFile), b, 0o644))
		return dir
	}
	for _, c := range []struct {
		name string
		edit func(g *golden)
		want string
	}{
		{"NaN", func(g *golden) { g.LogitsBits[7] = math.Float32bits(float32(math.NaN())) }, "logit 7 is NaN: a bad golden"},
		{"Inf", func(g *golden) { g.LogitsBits[9] = math.Float32bits(float32(math.Inf(-1))) }, "logit 9 is -Inf: a bad golden"},
		{"argmax", func(g *golden) { g.Argmax = (g.Argmax + 1) % g.Vocab }, "but its logits' largest is at"},
	} {
		code, out, errs := runK3("verify", tinyRelease, "--logits", "--golden", write(c.edit))
		assert.Equal(t, ExitUsage, code, c.name)
		assert.Contains(t, errs, c.want, c.name)
		assert.NotContains(t, out, "MISMATCH", c.name)
		assert.NotContains(t, out, "memory plan", c.name)
	}
}

// TestSeedGoldenFormat reads the released checkpoint's published logits
// (the seed's golden) and checks the comparison on the C engine's logits of
// the same run: the seed's own log says max |diff| 7.867813e-06, relative
// 5.237545e-07, argmax 2494, top-10 overlap 10/10.
func TestSeedGoldenFormat(t *testing.T) {
	dir := fixture.Path("seed-v1", "golden")
	g, err := readGolden(dir)
	require.NoError(t, err)
	assert.Equal(t, []int{3, 4, 5, 6, 7}, g.PromptIDs)
	assert.Equal(t, 163840, g.Vocab)
	assert.Equal(t, 2494, g.Argmax)
	assert.Equal(t, 0, g.Layers)
	assert.Equal(t, 2494, argmaxF32(g.logits))
	raw, err := os.ReadFile(filepath.Join(dir, "c_logits.bin"))
	require.NoError(t, err)
	require.Len(t, raw, 4*g.Vocab)
	c := make([]float32, g.Vocab)
	for i := range c {
		c[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	cmp := compareLogits(c, g.logits)
	assert.InDelta(t, 7.867813e-06, cmp.MaxDiff, 1e-11)
	assert.InDelta(t, 5.237545e-07, cmp.Rel, 1e-12)
	assert.Equal(t, 2494, cmp.ArgGot)
	assert.Equal(t, 10, cmp.TopShared)
	assert.True(t, cmp.ok())
	// one logit off by 1% of the largest: beyond the budget
	c[17] += float32(0.01 * cmp.MaxRef)
	assert.False(t, compareLogits(c, g.logits).ok())
}

func TestRunIDsDecodesText(t *testing.T) {
	demo := fixture.ModelDir("demo")
	tmp := t.TempDir()
	out := filepath.Join(tmp, "run.json")
	// the tokenizer in the model directory
	code, stdout, errs := runK3("run", demo, "--ids", "446,396,270,338,346,499", "--gen", "6", "--out", out)
	require.Equal(t, ExitOK, code, stdout+errs)
	rep := readRunReport(t, out)
	require.NotNil(t, rep.GeneratedText)
	tok, err := tokenizer.Load(demo)
	require.NoError(t, err)
	assert.Equal(t, string(tok.Decode(rep.GeneratedIDs)), *rep.GeneratedText)
	// the same run from the text gives the same text
	code, stdout2, errs := runK3("run", demo, "--ids", "446,396,270,338,346,499", "--gen", "6", "--tok", demo)
	require.Equal(t, ExitOK, code, stdout2+errs)
	assert.Contains(t, stdout2, "\n--- generated text ---\n"+*rep.GeneratedText+"\n")
	assert.NotEmpty(t, *rep.GeneratedText)
	// no tokenizer in the folder and no --tok: no text, no error
	code, stdout, errs = runK3("run", tinyRelease, "--ids", "1,2", "--gen", "2", "--out", out)
	require.Equal(t, ExitOK, code, stdout+errs)
	assert.Nil(t, readRunReport(t, out).GeneratedText)
	// --tok naming a folder without one: the ids run, with a warning and
	// no text (the C engine loads no tokenizer for --ids: a script that
	// always passes --tok ran; review row 129)
	ref := readRunReport(t, out).GeneratedIDs
	code, stdout, errs = runK3("run", tinyRelease, "--ids", "1,2", "--gen", "2", "--tok", tmp, "--out", out)
	require.Equal(t, ExitOK, code, stdout+errs)
	assert.Contains(t, errs, "warning: tokenizer: ")
	assert.Contains(t, errs, ": the ids run without a tokenizer, and the generated text is not decoded\n")
	assert.Nil(t, readRunReport(t, out).GeneratedText)
	assert.Equal(t, ref, readRunReport(t, out).GeneratedIDs)
	// a prompt's text needs one: refused
	code, _, errs = runK3("run", tinyRelease, "--prompt", "hello", "--tok", tmp)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "k3 run: tokenizer: ")
}

func TestTemplateContentParts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	// one part is the string; two parts are two segments, as Moonshot's
	// encoder (build_chat_segments) tokenizes them: "Hello " + "there" is
	// "Hello", " ", "there", where the joined text is "Hello", " there"
	plain := write("plain.json", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}]`)
	parts := write("parts.json", `{"messages":[{"role":"system","content":[{"type":"text","text":"Be brief."}]},`+
		`{"role":"user","content":[{"type":"text","text":"Hello "},{"type":"text","text":"there"}]}]}`)
	code, joined, errs := tokRunCmd("template", "--tok", tokParityDir, "--messages", plain)
	require.Equal(t, ExitOK, code, errs)
	code, got, errs := tokRunCmd("template", "--tok", tokParityDir, "--messages", parts)
	require.Equal(t, ExitOK, code, errs)
	var a, b struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	require.NoError(t, json.Unmarshal([]byte(joined), &a))
	require.NoError(t, json.Unmarshal([]byte(got), &b))
	assert.Equal(t, a.Text, b.Text, "the same text")
	tok, err := tokenizer.Load(tokParityDir)
	require.NoError(t, err)
	segs, err := xtml.Render([]xtml.Message{{Role: "system", Content: "Be brief."},
		{Role: "user", Parts: []xtml.Part{{Text: "Hello "}, {Text: "there"}}}}, nil, xtml.RenderOptions{})
	require.NoError(t, err)
	assert.Equal(t, xtml.Encode(tok, segs), b.IDs)
	assert.NotEqual(t, a.IDs, b.IDs, "other ids than the joined text's")
	// a part the server refuses is refused here too, with its message
	img := write("img.json", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`)
	code, _, errs = tokRunCmd("template", "--tok", tokParityDir, "--messages", img)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `content part 0: an image_url must be a base64 data: URL`)
	other := write("audio.json", `[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`)
	code, _, errs = tokRunCmd("template", "--tok", tokParityDir, "--messages", other)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `content part 0 is of type "input_audio": k3 takes text and image_url parts`)
}

func TestChatSystemPromptOnce(t *testing.T) {
	dir := demoModel(t)
	defer func() { stdin = nil }()
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	chatRun := func(input string, args ...string) string {
		t.Helper()
		stdin = strings.NewReader(input)
		code, out, errs := runK3(append([]string{"chat", dir, "--gen", "4", "--history", hist, "--chunk", "8"}, args...)...)
		require.Equal(t, ExitOK, code, out+errs)
		return out
	}
	load := func() []chat.Message {
		h, err := chat.LoadHistory(hist)
		require.NoError(t, err)
		return h
	}
	// --system is saved into the history, first
	chatRun("hello\n/exit\n", "--system", "Be kind.")
	h := load()
	require.Len(t, h, 3)
	assert.Equal(t, chat.Message{Role: "system", Content: "Be kind."}, h[0])
	assert.Equal(t, "hello", h[1].Content)

	// the same --system again: rendered once, so the turn reads as many
	// positions as without --system
	read := func(out string) string {
		i := strings.Index(out, "prompt positions reused, ")
		require.GreaterOrEqual(t, i, 0, out)
		return out[i : i+strings.Index(out[i:], " read")]
	}
	withFlag := chatRun("/exit\n", "--system", "Be kind.")
	assert.NotContains(t, withFlag, "replaces")
	assert.Len(t, load(), 3)
	saved, err := os.ReadFile(hist)
	require.NoError(t, err)
	a := chatRun("again\n/exit\n", "--system", "Be kind.")
	require.NoError(t, os.WriteFile(hist, saved, 0o644))
	b := chatRun("again\n/exit\n")
	assert.Equal(t, read(b), read(a))
	assert.Equal(t, 1, countRole(load(), "system"))

	// another --system replaces the history's, with a note, and is saved
	out := chatRun("/exit\n", "--system", "Be terse.")
	assert.Contains(t, out, "note: --system replaces the system prompt the history held")
	h = load()
	assert.Equal(t, "Be terse.", h[0].Content)
	assert.Equal(t, 1, countRole(h, "system"))

	// /reset is saved at once, the system prompt kept
	chatRun("/reset\n/exit\n")
	assert.Equal(t, []chat.Message{{Role: "system", Content: "Be terse."}}, load())
}

func countRole(h []chat.Message, role string) int {
	n := 0
	for _, m := range h {
		if m.Role == role {
			n++
		}
	}
	return n
}

func TestRunReportLines(t *testing.T) {
	ids := "491,109,188,458,164"
	// --recompute: one pass per token, and no speculation claimed
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "4", "--recompute")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "speculation: none under --recompute (every step runs the whole prefix), 0.00 accepted per pass, 1.00 passes per token")
	// teacher forcing generates nothing and says so
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--teacher-forcing")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "prompt   : 5 tokens, teacher forcing (one forward, nothing generated)")
	assert.NotContains(t, out, "generating")
}

func TestJSONKeepsMarkers(t *testing.T) {
	// --out: the report is written by strictjson.Marshal: markers as is
	text := "<|open|>assistant & more"
	b, err := strictjson.Marshal(runReport{GeneratedText: &text})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"generated_text":"<|open|>assistant & more"`)
	var back runReport
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, text, *back.GeneratedText)
	// histories too
	h := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, chat.SaveHistory(h, []chat.Message{{Role: "user", Content: "a <|open|> b & c"}}))
	raw, err := os.ReadFile(h)
	require.NoError(t, err)
	assert.Equal(t, `{"role":"user","content":"a <|open|> b & c"}`+"\n", string(raw))
	hb, err := chat.LoadHistory(h)
	require.NoError(t, err)
	assert.Equal(t, "a <|open|> b & c", hb[0].Content)
}

// readingLine is k3 chat's progress while it reads a message.
var readingLine = regexp.MustCompile(`\r?\[reading your message: [^\]]*\]\n?`)

func TestChatSeedTurnsSamplingOn(t *testing.T) {
	dir := demoModel(t)
	defer func() { stdin = nil }()
	reply := func(args ...string) (string, string) {
		t.Helper()
		stdin = strings.NewReader("hello\n/exit\n")
		code, out, errs := runK3(append([]string{"chat", dir, "--gen", "12", "--chunk", "8", "--no-think"}, args...)...)
		require.Equal(t, ExitOK, code, out+errs)
		// the progress lines while the message is read carry timings
		out = readingLine.ReplaceAllString(out, "")
		i := strings.Index(out, "> ")
		j := strings.Index(out[i:], "\n[")
		return out[:i], out[i : i+j] // the reply, without its timings
	}
	head, greedy := reply()
	assert.NotContains(t, head, "sampling:")
	head, s1 := reply("--seed", "1")
	assert.Contains(t, head, "sampling: on (temperature 1, top-p 0.95), turned on by --seed as in the C engine")
	_, s1again := reply("--seed", "1")
	assert.Equal(t, s1, s1again, "the same seed gives the same reply")
	head, _ = reply("--top-p", "0.5")
	assert.Contains(t, head, "sampling: on (temperature 1, top-p 0.5), turned on by --top-p")
	head, g2 := reply("--seed", "1", "--greedy")
	assert.NotContains(t, head, "sampling:")
	assert.Equal(t, greedy, g2)
	// some seed gives another reply than greedy decoding
	differs := s1 != greedy
	for seed := 2; seed < 6 && !differs; seed++ {
		_, s := reply("--seed", itoa(seed))
		differs = s != greedy
	}
	assert.True(t, differs, "sampling is on")
}

func TestCFilesNamed(t *testing.T) {
	tmp := t.TempDir()
	// a C trunk.json (pack_trunk.py's shape)
	tr := filepath.Join(tmp, "ctrunk")
	require.NoError(t, os.MkdirAll(tr, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tr, "trunk.json"), []byte(`{"n_layers": 8, "align": 4096, "layers": []}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(tr, "trunk.bin"), make([]byte, 4096), 0o644))
	code, _, errs := runK3("run", tinyRelease, "--ids", "1,2", "--trunk", tr)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "made by the C engine (kimi-k3-in-c): its trunks are another format; pack again with k3 pack")
	// a C state file: "K3ST", version 1, then its header
	st := filepath.Join(tmp, "c.state")
	b := append([]byte("K3ST"), make([]byte, 92)...)
	binary.LittleEndian.PutUint32(b[4:], 1)
	require.NoError(t, os.WriteFile(st, b, 0o644))
	code, out, errs := runK3("run", tinyRelease, "--ids", "1,2", "--load-state", st)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "made by the C engine (kimi-k3-in-c): its state files are another format")
	// refused before the model is opened: nothing bound, nothing read
	assert.NotContains(t, out, "memory plan")
	assert.NotContains(t, out, "trunk    :")
	// k3's own header, of a version this k3 does not read: refused as early
	own := append([]byte("K3STATE\x00"), make([]byte, 40)...)
	binary.LittleEndian.PutUint32(own[8:], 1)
	require.NoError(t, os.WriteFile(st, own, 0o644))
	code, out, errs = runK3("run", tinyRelease, "--ids", "1,2", "--load-state", st)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "was saved by an older k3")
	assert.NotContains(t, out, "memory plan")
	// k3's own state files still load
	ownState := filepath.Join(tmp, "own.state")
	code, out, errs = runK3("run", tinyRelease, "--ids", "1,2", "--gen", "1", "--save-state", ownState)
	require.Equal(t, ExitOK, code, out+errs)
	code, out, errs = runK3("run", tinyRelease, "--ids", "3", "--gen", "1", "--load-state", ownState)
	require.Equal(t, ExitOK, code, out+errs)
}

func TestThreadsFromEnvironment(t *testing.T) {
	ids := "491,109,188"
	t.Setenv("K3_THREADS", "")
	t.Setenv("OMP_NUM_THREADS", "1")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "threads: 1 (OMP_NUM_THREADS)\n")
	t.Setenv("K3_THREADS", "2")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "threads: 2 (K3_THREADS)\n")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--threads", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "threads: 1 (--threads)\n")
	// beyond the machine: clamped with a note
	cpus := strconv.Itoa(runtime.NumCPU())
	t.Setenv("K3_THREADS", "100000")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, errs, "note: 100000 threads (K3_THREADS) is more than the "+cpus+" logical CPUs this machine gives k3: using "+cpus+"\n")
	assert.Contains(t, out, "threads: "+cpus+" (K3_THREADS)\n")
	t.Setenv("K3_THREADS", "")
	t.Setenv("OMP_NUM_THREADS", "many")
	code, _, errs = runK3("run", tinyRelease, "--ids", ids)
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 run: OMP_NUM_THREADS=\"many\" is not a positive thread count\n", errs)
	// OpenMP's nested list, as the C engine's OpenMP read it: the first level
	t.Setenv("OMP_NUM_THREADS", "1,2")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "threads: 1 (OMP_NUM_THREADS)\n")
	t.Setenv("K3_THREADS", "1,2") // k3's own variable is one number
	code, _, errs = runK3("run", tinyRelease, "--ids", ids)
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 run: K3_THREADS=\"1,2\" is not a positive thread count\n", errs)
	t.Setenv("K3_THREADS", "")
	t.Setenv("OMP_NUM_THREADS", "")
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, " (one per physical core)\n")
}

func TestDownloadOfflineSaysCannotReach(t *testing.T) {
	// a port nothing listens on: connection refused, as offline
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	defer func(w func(int) time.Duration) { downloadProbeWait = w }(downloadProbeWait)
	downloadProbeWait = func(int) time.Duration { return time.Millisecond }
	code, out, errs := runK3("download", filepath.Join(t.TempDir(), "m"), "--endpoint", "http://"+addr)
	assert.Equal(t, ExitRuntime, code)
	assert.Equal(t, 3, strings.Count(out, "the hub: attempt "), out)
	// the refusal in plain words (ui/bridge's networds, shared with the app)
	assert.Contains(t, out, "the hub: attempt 3 failed (cannot reach 127.0.0.1: nothing answers there, so the server is not running or the port is wrong); retrying in 1ms")
	assert.Equal(t, "k3 download: cannot reach the model hub (127.0.0.1): nothing answers there, so the server is not running or the port is wrong, after 4 tries. Check the network connection and run the same command again.\n", errs)
}

// TestSmallExpertCacheRaisedAndSaid: a cache budget below the minimum
// (plan.MinExpertSlots: top-k + 1 = 4 experts at this model's top-k of 3)
// is raised to it (exact output, more memory) and the plan says so, with
// the bytes it then counts.
func TestSmallExpertCacheRaisedAndSaid(t *testing.T) {
	code, out, errs := runK3("run", tinyRelease, "--ids", "1,2", "--gen", "1", "--cache-gb", "0")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "expert cache     49.15 KB  (4 slots)")
	assert.Contains(t, out, "note: expert cache budget 0.00 B is below the minimum of 4 experts (top-k 3 + 1): raised to 49.15 KB (4 slots), counted in this plan")
}

func TestRunReportBudgetsAndTrunkRate(t *testing.T) {
	code, out, errs := runK3("run", tinyRelease, "--ids", "1,2", "--gen", "2", "--preset", "laptop", "--cache-gb", "0.001")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "budgets: preset laptop: trunk 3.00 GB, expert cache 0.00 GB, available memory ")
	code, out, errs = runK3("run", tinyRelease, "--ids", "1,2", "--gen", "2")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, out, "budgets: no preset: trunk 16.00 GB, expert cache 64.00 GB")
	assert.Regexp(t, `trunk: .* bound at load, .* streamed \([0-9.]+ [KMG]?B/s over the run\); waited`, out)
}

// TestCVariables: the C engine's environment variables are honoured where
// k3 has the same switch, and each other one gets one warning saying what
// k3 does instead (they used to be ignored without a word).
func TestCVariables(t *testing.T) {
	ids := "491,109,188"
	for _, v := range []string{"K3_NOSPEC", "K3_NOPREFETCH", "K3_PIN_PREFIX", "K3_NOURING", "K3_SQPOLL"} {
		t.Setenv(v, "1")
	}
	t.Setenv("K3_CACHE_POLICY", "lru")
	t.Setenv("K3_NO_BATCH_PREFILL", "1")
	t.Cleanup(func() { direct.SetHugePages(true) })
	t.Setenv("K3_NOHUGE", "1")
	code, out, errs := runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	require.Equal(t, ExitOK, code, out+errs)
	for _, v := range []string{"K3_NOSPEC", "K3_NOPREFETCH", "K3_PIN_PREFIX", "K3_NOURING", "K3_SQPOLL"} {
		assert.Equal(t, 1, strings.Count(errs, "warning: "+v+"=1 (the C engine's variable) is ignored: "), v)
	}
	assert.Contains(t, errs, "note: K3_CACHE_POLICY=lru (the C engine's variable): expert cache policy lru, as --cache-policy lru\n")
	assert.Contains(t, out, ", policy lru)")
	assert.Contains(t, errs, "note: K3_NO_BATCH_PREFILL=1 (the C engine's variable): prefill feeds one position per pass, as --chunk 1\n")
	assert.Contains(t, out, "  prefill  : 1/3 positions")
	assert.Contains(t, errs, "note: K3_NOHUGE=1 (the C engine's variable): weight and cache buffers are not advised as transparent huge pages")
	b, err := direct.AllocHuge(1)
	require.NoError(t, err)
	assert.False(t, b.Huge())
	require.NoError(t, b.Free())

	// a flag wins over the variable
	code, out, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1", "--cache-policy", "s3fifo", "--chunk", "4")
	require.Equal(t, ExitOK, code, out+errs)
	assert.Contains(t, errs, "K3_CACHE_POLICY=lru (the C engine's variable): --cache-policy s3fifo wins over it")
	assert.Contains(t, out, ", policy s3fifo)")
	// an unknown policy is refused as the flag's would be
	t.Setenv("K3_CACHE_POLICY", "fifo")
	code, _, errs = runK3("run", tinyRelease, "--ids", ids, "--gen", "1")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "k3 run: --cache-policy \"fifo\" is not")
}

// TestEmptyPromptNamed: an empty --prompt (or --ids, --prompt-file) is
// named as empty; it used to get "give exactly one of ...", which it was.
func TestEmptyPromptNamed(t *testing.T) {
	for _, f := range []string{"--prompt", "--ids", "--prompt-file"} {
		code, out, errs := runK3("run", tinyRelease, f, "")
		assert.Equal(t, ExitUsage, code, f)
		assert.Empty(t, out, f)
		assert.Equal(t, "k3 run: "+f+" is empty: there is no prompt to read\n", errs, f)
	}
	code, _, errs := runK3("run", tinyRelease, "--gen", "1")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 run: give exactly one of --ids, --prompt or --prompt-file\n", errs)
	code, _, errs = runK3("run", tinyRelease, "--ids", "1", "--prompt", "x")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "k3 run: give exactly one of --ids, --prompt or --prompt-file\n", errs)
}

// TestDownloadCVariables: the C engine's download script read K3_REVISION
// (the commit to fetch) and K3_SKIP_CHECKSUM; k3 download honours the
// first as --revision (a flag given wins) and warns about the second. Both
// were ignored without a word.
func TestDownloadCVariables(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	t.Setenv("K3_REVISION", commit)
	t.Setenv("K3_SKIP_CHECKSUM", "1")
	var errs strings.Builder
	c, code := parseDownload([]string{t.TempDir()}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, commit, c.opt.Revision)
	assert.Equal(t, "note: K3_REVISION="+commit+" (the C engine's variable): downloading revision "+commit+", as --revision "+commit+"\n"+
		"warning: K3_SKIP_CHECKSUM=1 (the C engine's variable) is ignored: k3 download checks each file's size and SHA-256 as it arrives, so there is no second pass to skip\n", errs.String())

	errs.Reset()
	t.Setenv("K3_SKIP_CHECKSUM", "")
	c, code = parseDownload([]string{t.TempDir(), "--revision", "main"}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.Equal(t, "main", c.opt.Revision)
	assert.Equal(t, "note: K3_REVISION="+commit+" (the C engine's variable): --revision main wins over it\n", errs.String())

	errs.Reset()
	c, code = parseDownload([]string{t.TempDir(), "--draft"}, &errs)
	require.Equal(t, -1, code, errs.String())
	assert.NotEqual(t, commit, c.opt.Revision, "the drafter is pinned")
	assert.Empty(t, errs.String())
}

// TestCommandNamedFolderHinted: a model folder named as a command (`k3 demo
// demo` writes one) given first C-style runs the command, and when the
// command refuses its arguments a note names the folder and k3 run; a
// command that runs, or with no such folder, gets none.
func TestCommandNamedFolderHinted(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "demo"), os.DirFS(tinyRelease)))
	t.Chdir(dir)
	code, _, errs := runK3("demo", "--ids", "1,2", "--gen", "2")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, "k3 demo: unknown flag --ids")
	assert.True(t, strings.HasSuffix(errs, "note: demo is also a model folder here; to run it: k3 run ./demo ...\n"), errs)
	code, out, errs := runK3("run", "./demo", "--ids", "1,2", "--gen", "2", "--out=")
	require.Equal(t, ExitOK, code, out+errs)
	code, _, errs = runK3("chat", "--bogus")
	assert.Equal(t, ExitUsage, code)
	assert.NotContains(t, errs, "also a model folder")
}
