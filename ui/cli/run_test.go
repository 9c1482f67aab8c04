package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/cachesim"
	"k3/internal/fixture"
)

var tinyRelease = fixture.ModelDir("tiny-release")

func readExpect(t *testing.T) *fixture.Expect { return fixture.LoadExpect(t, "tiny-release") }

func runK3(args ...string) (int, string, string) {
	var o, e bytes.Buffer
	code := run(args, &o, &e)
	return code, o.String(), e.String()
}

func idsArg(ids []int) string { return fixture.IDs(ids) }

func itoa(v int) string { return strconv.Itoa(v) }

func TestRunMatchesReference(t *testing.T) {
	ex := readExpect(t)
	p := ex.Prompts[1] // the long prompt: several prefill chunks
	dir := t.TempDir()
	out := filepath.Join(dir, "run.json")
	logits := filepath.Join(dir, "logits.bin")
	code, stdout, stderr := runK3("run", tinyRelease, "--ids", idsArg(p.PromptIDs), "--gen", itoa(len(p.GreedyIDs)),
		"--chunk", "16", "--out", out, "--dump-logits", logits, "--threads", "2")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep runReport
	raw, _ := os.ReadFile(out)
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.GeneratedIDs, p.GreedyIDs) || !slices.Equal(rep.FullIDs, p.FullIDs) || rep.StopReason != "length" {
		t.Fatalf("report %+v", rep)
	}
	if rep.TrunkBytesRead <= 0 || rep.ExpertBytesRead <= 0 || rep.PeakRSSBytes <= 0 || rep.ExpertDrops != 0 {
		t.Fatalf("stats not filled: %+v", rep)
	}
	b, _ := os.ReadFile(logits)
	if len(b) != 4*len(p.FirstLogits) {
		t.Fatalf("dumped %d bytes", len(b))
	}
	for i, want := range p.FirstLogits {
		got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Fatalf("logit %d: %v, reference %v", i, got, want)
		}
	}
	if !strings.Contains(stdout, "STEP") || !strings.Contains(stdout, "s/token") {
		t.Fatalf("no step report:\n%s", stdout)
	}
	// --recompute gives the same tokens; --teacher-forcing gives tf_pred
	code, _, stderr = runK3("run", tinyRelease, "--ids", idsArg(p.PromptIDs), "--gen", "4", "--recompute", "--out", out)
	raw, _ = os.ReadFile(out)
	json.Unmarshal(raw, &rep)
	if code != 0 || !slices.Equal(rep.GeneratedIDs, p.GreedyIDs[:4]) {
		t.Fatalf("recompute: exit %d %v %s", code, rep.GeneratedIDs, stderr)
	}
	code, _, stderr = runK3("run", tinyRelease, "--ids", idsArg(p.FullIDs), "--teacher-forcing", "--out", out)
	raw, _ = os.ReadFile(out)
	json.Unmarshal(raw, &rep)
	if code != 0 || !slices.Equal(rep.TFPred, p.TFPred) {
		t.Fatalf("teacher forcing: exit %d %v %s", code, rep.TFPred, stderr)
	}
	// --stop-id stops after emitting the id, which stays in the output
	code, _, _ = runK3("run", tinyRelease, "--ids", idsArg(p.PromptIDs), "--gen", "12", "--stop-id", itoa(p.GreedyIDs[2]), "--out", out)
	raw, _ = os.ReadFile(out)
	json.Unmarshal(raw, &rep)
	if code != 0 || rep.StopReason != "stop_id" || !slices.Equal(rep.GeneratedIDs, p.GreedyIDs[:3]) {
		t.Fatalf("stop-id: %d %+v", code, rep)
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no model", []string{"run", "--ids", "1"}, ExitUsage, "exactly one MODEL_DIR"},
		{"two sources", []string{"run", tinyRelease, "--ids", "1", "--prompt", "x"}, ExitUsage, "exactly one of"},
		{"bad ids", []string{"run", tinyRelease, "--ids", "1,x"}, ExitUsage, `"x" is not`},
		{"id out of vocab", []string{"run", tinyRelease, "--ids", "1,512"}, ExitUsage, "outside the vocabulary"},
		{"refused config", []string{"run", tinyRelease, "--ids", "1", "--config", fixture.Path("seed-v1/cfg/bad_topk.json")}, ExitUsage, "num_experts_per_token = 128 exceeds"},
		{"out not writable", []string{"run", tinyRelease, "--ids", "1", "--out", filepath.Join(dir, "no/such/dir/x.json")}, ExitOutput, "cannot write"},
		{"missing dir", []string{"run", filepath.Join(dir, "nothing"), "--ids", "1"}, ExitUsage, "no such file"},
		{"unknown flag", []string{"run", tinyRelease, "--idz", "1"}, ExitUsage, "idz"},
		{"bad spec", []string{"run", tinyRelease, "--ids", "1", "--spec", "many"}, ExitUsage, "--spec: speculation \"many\" is not auto"},
	}
	for _, c := range cases {
		code, _, stderr := runK3(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", c.name, code, c.code, stderr, c.msg)
		}
	}
}

// TestRunSpec: --spec changes how many forwards decoding takes, never the
// ids; the report and --out say what was drafted and accepted.
func TestRunSpec(t *testing.T) {
	p := readExpect(t).Prompts[0]
	out := filepath.Join(t.TempDir(), "run.json")
	reports := map[string]runReport{}
	for _, spec := range []string{"off", "auto", "6"} {
		code, stdout, stderr := runK3("run", tinyRelease, "--ids", idsArg(p.PromptIDs), "--gen", "30", "--spec", spec, "--out", out, "--threads", "2")
		require.Equal(t, ExitOK, code, "%s\n%s", stdout, stderr)
		assert.Contains(t, stdout, "speculation "+spec+": ")
		var rep runReport
		raw, err := os.ReadFile(out)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, &rep))
		require.Contains(t, string(raw), `"forward_passes":`)
		reports[spec] = rep
	}
	off, auto, forced := reports["off"], reports["auto"], reports["6"]
	assert.Equal(t, off.GeneratedIDs, auto.GeneratedIDs)
	assert.Equal(t, off.GeneratedIDs, forced.GeneratedIDs)
	// one prefill chunk, then one forward per token but the first
	assert.Equal(t, runReport{ForwardPasses: 30}, runReport{SpecDrafted: off.SpecDrafted, SpecAccepted: off.SpecAccepted, ForwardPasses: off.ForwardPasses})
	// resident and compute-bound: auto does not draft
	assert.Equal(t, int64(0), auto.SpecDrafted)
	assert.Greater(t, forced.SpecDrafted, int64(0))
	assert.LessOrEqual(t, forced.SpecAccepted, forced.SpecDrafted)
	assert.Equal(t, 30-forced.SpecAccepted, forced.ForwardPasses)
}

// TestRunMissingTensor: a checkpoint lacking a tensor is refused with its name (exit 1).
func TestRunMissingTensor(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"} {
		b, err := os.ReadFile(filepath.Join(tinyRelease, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	// drop layer 3's q_proj from the index: the shard still has it, but the
	// index no longer names it, so the set must refuse or the binder must.
	var idx struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	raw, _ := os.ReadFile(filepath.Join(tinyRelease, "model.safetensors.index.json"))
	json.Unmarshal(raw, &idx)
	delete(idx.WeightMap, "language_model.model.layers.3.self_attn.q_proj.weight")
	b, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), b, 0o644)
	code, _, stderr := runK3("run", dir, "--ids", "1,2")
	if code != ExitRuntime || !strings.Contains(stderr, "layers.3.self_attn.q_proj.weight") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

// TestRunExpertFailure: a routed expert that cannot be read makes the run invalid (exit 4).
func TestRunExpertFailure(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	var o, e bytes.Buffer
	c, code := parseRun([]string{tinyRelease, "--ids", "1,2,3", "--out", out}, &o, &e)
	require.Equal(t, -1, code, e.String())
	c.opts.ExpertReadAt = func(path string, off int64, dst []byte) error { return errors.New("input/output error") }
	code = c.run(context.Background(), &o, &e)
	require.Equal(t, ExitExpertLoad, code, e.String())
	assert.Contains(t, e.String(), "RUN INVALID")
	assert.Contains(t, e.String(), "model-0000")
	var rep runReport
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.NotZero(t, rep.ExpertDrops, "drops counted")
	assert.Equal(t, "error", rep.StopReason, "audit D18: an invalid run does not say it reached its length")
	// the last forward stopped at the first MoE layer: the dense ones before it completed
	assert.Equal(t, 8, rep.LayersRequested)
	assert.Less(t, rep.LayersCompleted, rep.LayersRequested)
	assert.Positive(t, rep.LayersCompleted)
}

// lineWatcher is an io.Writer that reports the first write containing a word.
type lineWatcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	word string
	seen chan struct{}
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && bytes.Contains(p, []byte(w.word)) {
		close(w.seen)
		w.seen = nil
	}
	return len(p), nil
}

// TestRunInterruptDuringPrefill: Ctrl-C while a long prompt is read stops
// before the next layer — within the prompt's first quarter —
// writes --out and the saved state (the whole chunks read), and exits 5.
func TestRunInterruptDuringPrefill(t *testing.T) {
	dir := demoModel(t)
	ids := make([]int, 2000)
	for i := range ids {
		ids[i] = (7 + 13*i) % 256
	}
	tmp := t.TempDir()
	args := func(out string) []string {
		return []string{"run", dir, "--ids", idsArg(ids), "--gen", "4", "--chunk", "64", "--threads", "2", "--out", filepath.Join(tmp, out)}
	}
	t0 := time.Now()
	code, _, stderr := runK3(args("full.json")...)
	full := time.Since(t0)
	require.Equal(t, ExitOK, code, stderr)

	w := &lineWatcher{word: "prefill", seen: make(chan struct{})}
	seen := w.seen
	var errOut bytes.Buffer
	state := filepath.Join(tmp, "cut.k3state")
	done := make(chan int)
	go func() {
		done <- run(append(args("cut.json"), "--save-state", state, "--prompt-cache", filepath.Join(tmp, "prompts")), w, &errOut)
	}()
	<-seen // the first progress line: the prompt is being read
	t1 := time.Now()
	require.NoError(t, interruptSelf())
	code = <-done
	stop := time.Since(t1)
	require.Equal(t, ExitInterrupted, code, errOut.String())
	assert.Contains(t, errOut.String(), "interrupted")
	t.Logf("uninterrupted run %v; stopped %v after Ctrl-C (%.1f%%)", full, stop, 100*stop.Seconds()/full.Seconds())
	var rep runReport
	raw, err := os.ReadFile(filepath.Join(tmp, "cut.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Equal(t, "cancelled", rep.StopReason)
	assert.Empty(t, rep.GeneratedIDs)
	assert.Equal(t, ids, rep.PromptIDs)
	// the saved state holds whole chunks of the prompt, and resumes exactly
	n, err := engine.PeekStatePositions(state)
	require.NoError(t, err)
	assert.Positive(t, n)
	// the work done, not the time: Ctrl-C right after the first progress
	// line stops the prompt within its first quarter
	assert.LessOrEqual(t, n, len(ids)/4, "positions read before the stop")
	assert.Zero(t, n%64, "whole chunks only")
	// the prompt cache's line counts what was read, not the whole prompt
	w.mu.Lock()
	assert.Contains(t, w.buf.String(), fmt.Sprintf("prompt cache: reused 0 of %d prompt positions, read %d (interrupted: %d not read)\n", len(ids), n, len(ids)-n))
	w.mu.Unlock()
	var fullRep runReport
	raw, _ = os.ReadFile(filepath.Join(tmp, "full.json"))
	require.NoError(t, json.Unmarshal(raw, &fullRep))
	code, _, stderr = runK3("run", dir, "--ids", idsArg(ids[n:]), "--gen", "4", "--load-state", state, "--out", filepath.Join(tmp, "resumed.json"))
	require.Equal(t, ExitOK, code, stderr)
	var resumed runReport
	raw, _ = os.ReadFile(filepath.Join(tmp, "resumed.json"))
	require.NoError(t, json.Unmarshal(raw, &resumed))
	assert.Equal(t, fullRep.GeneratedIDs, resumed.GeneratedIDs)
}

// TestRunPrompt: text in, text out, with the model directory's tokenizer.
func TestRunPrompt(t *testing.T) {
	dir := demoModel(t)
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runK3("run", dir, "--prompt", "Hello, K3!", "--gen", "5", "--out", out)
	if code != ExitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	var rep runReport
	raw, _ := os.ReadFile(out)
	json.Unmarshal(raw, &rep)
	// "Hello, K3!" is 10 bytes = 10 ids in a byte-level vocabulary
	if len(rep.PromptIDs) != 10 || rep.GeneratedText == nil || len(rep.GeneratedIDs) != 5 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(stdout, "tokenized: 10 bytes -> 10 ids") || !strings.Contains(stdout, "--- generated text ---") {
		t.Fatalf("stdout:\n%s", stdout)
	}
}

// TestRunTrace: the expert-access trace holds one request per (token, layer, expert).
func TestRunTrace(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runK3("run", tinyRelease, "--ids", "1,2,3,4", "--gen", "3", "--chunk", "1", "--dump-cache-trace", dir)
	if code != ExitOK {
		t.Fatalf("exit %d %s", code, stderr)
	}
	reqs, err := cachesim.ReadTrace(filepath.Join(dir, "expert_trace.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// 6 positions fed (4 prompt + 2 generated), 6 MoE layers (layers 2..7), top-3
	if len(reqs) != 6*6*3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if _, err := os.Stat(filepath.Join(dir, "expert_hist.json")); err != nil {
		t.Fatal(err)
	}
}

func TestPresetsList(t *testing.T) {
	for _, args := range [][]string{{"presets"}, {"--list-presets"}} {
		code, out, _ := runK3(args...)
		if code != ExitOK || !strings.Contains(out, "laptop") || !strings.Contains(out, "3.00 / 1.00") || !strings.Contains(out, "auto") {
			t.Fatalf("%v: %d\n%s", args, code, out)
		}
	}
	// the plans are the CLI's, with the app's beside them (its base)
	_, out, _ := runK3("presets")
	assert.Contains(t, out, "The plans are of k3 run and k3 chat: a process base of 0.08 GB (the Go runtime, the tokenizer, the checkpoint's tensor index of 0.01 GB)")
	assert.Contains(t, out, "The app's plans are 0.24 GB more (its window toolkit): ultra 3.64 GB, laptop 7.16 GB.")
	assert.Contains(t, out, "ultra          2.50 / 0.16      3.40 GB planned")
}
