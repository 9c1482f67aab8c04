package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/chat"
	"k3/internal/fixture"
	st "k3/storage/safetensors"
)

// copyModel copies a model directory into a fresh temporary one.
func copyModel(t *testing.T, src string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), filepath.Base(src))
	require.NoError(t, os.CopyFS(dir, os.DirFS(src)))
	return dir
}

// patchTensor overwrites bytes of a tensor's data in place.
func patchTensor(t *testing.T, dir, tensor string, off int64, b []byte) {
	t.Helper()
	set, err := st.Open(dir)
	require.NoError(t, err)
	tn, ok := set.Get(tensor)
	require.True(t, ok, tensor)
	path, at := tn.Path, tn.Offset+off
	set.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Audit D7 (rows 1.7, 1.8): NaN weights fail the run with exit 1, naming
// the layer, instead of printing token 0 with exit 0.
func TestRunRefusesNonFiniteOutput(t *testing.T) {
	dir := copyModel(t, tinyRelease)
	patchTensor(t, dir, "language_model.model.layers.1.input_layernorm.weight", 0, []byte{0xC0, 0x7F})
	out := filepath.Join(t.TempDir(), "o.json")
	code, _, errs := runK3("run", dir, "--ids", "1,2,3", "--gen", "2", "--out", out)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "non-finite values (NaN or Inf) first appeared in the output of layer 1 (model.layers.1.*)")
}

// Audit D8 and D22 (rows 5.9, 5.28, 5.33-5.36): numeric flags that overflow,
// are not numbers or are out of range are refused with exit 2 before
// anything runs.
func TestNumericFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--cache-gb", "1e10"}, "budgets are at most 9e+09 GB"},
		{[]string{"--cache-gb", "9.3e9"}, "budgets are at most"},
		{[]string{"--cache-gb", "1e300"}, "budgets are at most"},
		{[]string{"--cache-gb", "Inf"}, `invalid value "Inf" for flag -cache-gb: want a finite number`},
		{[]string{"--cache-gb=NaN"}, `invalid value "NaN" for flag -cache-gb: want a finite number`},
		{[]string{"--trunk-gb", "nan"}, "want a finite number"},
		{[]string{"--trunk-gb", "-inf"}, "want a finite number"},
		{[]string{"--trunk-gb", "0x10p0"}, "want a decimal number"},
		{[]string{"--threads", "-3"}, "--threads -3 must be 0"},
		{[]string{"--threads", "+2"}, `invalid value "+2" for flag -threads: want a decimal integer`},
		{[]string{"--layers", "-1"}, "--layers -1 must be 0"},
		{[]string{"--layers", "1000"}, "1000 layers asked for, the model has 8"},
		{[]string{"--gen", "0x10"}, "want a decimal integer"},
		{[]string{"--chunk", "1_0"}, "want a decimal integer"},
		{[]string{"--chunk", "0"}, "--chunk 0: give 1..1048576 prompt positions per pass, or leave --chunk out"},
		{[]string{"--chunk", "-4"}, "--chunk -4: give 1..1048576"},
		{[]string{"--chunk", "99999999"}, "--chunk 99999999: give 1..1048576"},
		{[]string{"--stop-id", "+5"}, "want a non-negative integer"},
	} {
		args := append([]string{"run", tinyRelease, "--ids", "1,2,3", "--gen", "1"}, c.args...)
		code, _, errs := runK3(args...)
		assert.Equal(t, ExitUsage, code, "%v: %s", c.args, errs)
		assert.Contains(t, errs, c.msg, c.args)
	}
	code, _, errs := runK3("run", tinyRelease, "--ids", "+5", "--gen", "1")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errs, `"+5" is not a non-negative integer`)
	dir := demoModel(t)
	for _, bad := range []string{"NaN", "Inf"} {
		stdin = strings.NewReader("hi\n")
		code, _, errs := runK3("chat", dir, "--temperature", bad)
		stdin = nil
		assert.Equal(t, ExitUsage, code, errs)
		assert.Contains(t, errs, "want a finite number")
	}
	// plain values still work, a sign on a float included
	code, out, errs := runK3("run", tinyRelease, "--ids", "1,2,3", "--gen", "1", "--cache-gb", "+0.5", "--threads", "2", "--layers", "4")
	assert.Equal(t, ExitOK, code, out+errs)
}

// Audit D12 (row 1.66): a config with fewer layers than the checkpoint is
// refused instead of silently dropping the last layers.
func TestRunRefusesAConfigWithFewerLayers(t *testing.T) {
	dir := copyModel(t, tinyRelease)
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	edited := strings.Replace(string(raw), `"num_hidden_layers": 8`, `"num_hidden_layers": 7`, 1)
	edited = strings.Replace(edited, `"full_attn_layers": [
        3,
        7,
        8
      ]`, `"full_attn_layers": [3, 7]`, 1)
	require.Equal(t, 2, strings.Count(string(raw), "8")-strings.Count(edited, "8"), "the fixture's layer lists moved")
	require.NoError(t, os.WriteFile(cfgPath, []byte(edited), 0o644))
	code, _, errs := runK3("run", dir, "--ids", "1,2,3", "--gen", "1")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "the checkpoint has weights for 8 layers (language_model.model.layers.0 to .7) but")
	assert.Contains(t, errs, "num_hidden_layers = 7")
}

// Audit D2 (rows 1.116, 1.117): a trunk packed from one checkpoint is not
// used for, nor called complete for, a same-layout checkpoint with other
// weights.
func TestPackAndRunRefuseAStaleTrunk(t *testing.T) {
	orig := copyModel(t, tinyRelease)
	trunkDir := filepath.Join(t.TempDir(), "T")
	code, out, errs := runK3("pack", orig, trunkDir, "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, out+errs)

	ft := copyModel(t, orig)
	name := "language_model.model.layers.1.self_attn.o_proj.weight"
	set, err := st.Open(ft)
	require.NoError(t, err)
	tn, _ := set.Get(name)
	shard, size := filepath.Base(tn.Path), tn.Size
	set.Close()
	patchTensor(t, ft, name, 0, make([]byte, size)) // other weights, same layout

	code, out, errs = runK3("pack", ft, trunkDir, "--disk-test-mb", "0", "--quiet")
	assert.Equal(t, ExitUsage, code)
	assert.NotContains(t, out, "already complete")
	assert.Contains(t, errs, shard+" changed after the trunk in "+trunkDir+" was packed: run layer.1")
	assert.Contains(t, errs, "--force")

	code, _, errs = runK3("run", ft, "--trunk", trunkDir, "--ids", "1,2,3", "--gen", "2")
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "was modified after the trunk in "+trunkDir)

	code, out, errs = runK3("pack", ft, trunkDir, "--disk-test-mb", "0", "--quiet", "--force")
	require.Equal(t, ExitOK, code, out+errs)
	code, out, errs = runK3("run", ft, "--trunk", trunkDir, "--ids", "1,2,3", "--gen", "2")
	assert.Equal(t, ExitOK, code, out+errs)
}

// Audit D11 (rows 2.31, 3.28): what a pack or a state save killed with -9
// left behind is removed by the next run of the same command, which says so.
func TestStaleTemporaryFilesRemoved(t *testing.T) {
	dead := fixture.DeadPID(t)
	trunkDir := t.TempDir()
	disk := filepath.Join(trunkDir, fmt.Sprintf(".k3-disktest-%d.tmp", dead))
	tmp := filepath.Join(trunkDir, fmt.Sprintf(".trunk.partial.json.tmp%d-42", dead))
	mine := filepath.Join(trunkDir, fmt.Sprintf(".k3-disktest-%d.tmp", os.Getpid()))
	for _, p := range []string{disk, tmp, mine} {
		require.NoError(t, os.WriteFile(p, make([]byte, 5000), 0o644))
	}
	code, out, errs := runK3("pack", tinyRelease, trunkDir, "--disk-test-mb", "0", "--quiet")
	require.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "note: removed 2 temporary file(s) an interrupted k3 pack left: ")
	assert.Contains(t, out, disk+" (5.00 KB)")
	for _, p := range []string{disk, tmp} {
		assert.NoFileExists(t, p)
	}
	assert.FileExists(t, mine, "a live process's file is kept")

	state := filepath.Join(t.TempDir(), "s.k3state")
	left := filepath.Join(filepath.Dir(state), fmt.Sprintf(".s.k3state.tmp%d-7", dead))
	require.NoError(t, os.WriteFile(left, []byte("half a state"), 0o644))
	code, out, errs = runK3("run", tinyRelease, "--ids", "1,2,3", "--gen", "0", "--save-state", state)
	require.Equal(t, ExitOK, code, errs)
	assert.Contains(t, out, "note: removed 1 temporary file(s) an interrupted k3 run left: "+left)
	assert.NoFileExists(t, left)
	assert.FileExists(t, state)
}

// Audit D14 (row 4.27): a message over 16 MiB is refused with a message and
// the chat goes on with the next line (it used to end with exit 0).
func TestChatRefusesAHugeLineAndGoesOn(t *testing.T) {
	dir := demoModel(t)
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	stdin = strings.NewReader(strings.Repeat("a", 17<<20) + "\nhi\n")
	defer func() { stdin = nil }()
	code, _, errs := runK3("chat", dir, "--gen", "2", "--history", hist, "--chunk", "8")
	assert.Equal(t, ExitOK, code, errs)
	assert.Contains(t, errs, "that message is longer than 16 MiB and was not sent")
	h, err := chat.LoadHistory(hist)
	require.NoError(t, err)
	require.Len(t, h, 2)
	assert.Equal(t, "hi", h[0].Content)
}

func TestReadLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("one\r\n"+strings.Repeat("x", 100)+"\n"+strings.Repeat("y", 10)+"\nlast"), 16)
	for _, want := range []struct {
		line    string
		tooLong bool
		err     error
	}{{"one\r", false, nil}, {"", true, nil}, {strings.Repeat("y", 10), false, nil}, {"last", false, io.EOF}, {"", false, io.EOF}} {
		line, tooLong, err := readLine(r, 10)
		assert.Equal(t, want.line, line)
		assert.Equal(t, want.tooLong, tooLong)
		assert.Equal(t, want.err, err)
	}
}

// Audit D21 and D9 (rows 4.30, 5.21): a second Ctrl-C writes what was done
// and exits 5, not 130.
func TestSecondInterruptWritesWhatWasDoneAndExits5(t *testing.T) {
	exited := make(chan int, 1)
	exitNow = func(code int) { exited <- code }
	defer func() { exitNow = os.Exit }()

	out := filepath.Join(t.TempDir(), "o.json")
	c := &runConfig{ids: []int{1, 2, 3}, out: out, saveState: "s"}
	c.soFar.gen, c.soFar.steps = []int{7, 8}, []float64{0.5, 0.25}
	ch := make(chan os.Signal, 2)
	var errs bytes.Buffer
	ctx, cancel := watchInterrupts(ch, &errs, func() { c.writeSoFar(&errs) })
	defer cancel()
	ch <- os.Interrupt
	<-ctx.Done()
	ch <- os.Interrupt
	assert.Equal(t, ExitInterrupted, <-exited)
	var rep runReport
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	assert.Equal(t, []int{7, 8}, rep.GeneratedIDs)
	assert.Equal(t, []int{1, 2, 3, 7, 8}, rep.FullIDs)
	assert.Equal(t, "cancelled", rep.StopReason)
	assert.Contains(t, errs.String(), "stopped at once by a second Ctrl-C: wrote "+out+" with the 2 token(s) generated so far; the decode state was not saved")

	// chat: the reply being stopped is kept, marked stopped
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	pt := &partialTurn{before: []chat.Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}, user: "c"}
	pt.add(engine.Event{Kind: engine.EventReasoning, Text: "thinking"})
	pt.add(engine.Event{Kind: engine.EventAnswer, Text: "half an ans"})
	var mu sync.Mutex
	var cancelTurn context.CancelFunc
	inFlight := pt
	sig := make(chan os.Signal, 1)
	errs.Reset()
	go watchChatInterrupts(sig, &errs, &mu, &cancelTurn, &inFlight, hist)
	sig <- os.Interrupt
	assert.Equal(t, ExitInterrupted, <-exited)
	h, err := chat.LoadHistory(hist)
	require.NoError(t, err)
	require.Len(t, h, 4)
	assert.Equal(t, chat.Message{Role: "assistant", Content: "half an ans", ReasoningContent: "thinking", Cut: chat.CutStopped}, h[3])

	// at the idle prompt: exit 5 too
	inFlight = nil
	sig2 := make(chan os.Signal, 1)
	go watchChatInterrupts(sig2, &errs, &mu, &cancelTurn, &inFlight, hist)
	sig2 <- os.Interrupt
	assert.Equal(t, ExitInterrupted, <-exited)
}

// Audit D17 (row 5.44): an unwritable --dump-cache-trace is refused before
// the run (exit 3), not after all the work.
func TestRunChecksTheTraceDirFirst(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	out := filepath.Join(t.TempDir(), "o.json")
	code, stdout, errs := runK3("run", tinyRelease, "--ids", "1,2,3", "--gen", "2", "--out", out, "--dump-cache-trace", filepath.Join(file, "trace"))
	assert.Equal(t, ExitOutput, code)
	assert.Contains(t, errs, "--dump-cache-trace: cannot write "+filepath.Join(file, "trace"))
	assert.NotContains(t, stdout, "STEP", "refused before the run")
	// a trace directory that does not exist yet is fine
	trace := filepath.Join(t.TempDir(), "a", "b")
	code, _, errs = runK3("run", tinyRelease, "--ids", "1,2,3", "--gen", "2", "--out", out, "--dump-cache-trace", trace)
	require.Equal(t, ExitOK, code, errs)
	assert.FileExists(t, filepath.Join(trace, "expert_trace.bin"))
	assert.FileExists(t, out)
}

// Audit D16 (row 3.5): a state file with a corrupt position count is
// refused as corrupt, not by a memory plan sized from the bad count.
func TestRunCorruptStateCountIsAChecksumError(t *testing.T) {
	state := filepath.Join(t.TempDir(), "s")
	code, _, errs := runK3("run", tinyRelease, "--ids", "1,2,3", "--gen", "0", "--save-state", state)
	require.Equal(t, ExitOK, code, errs)
	raw, err := os.ReadFile(state)
	require.NoError(t, err)
	binary.LittleEndian.PutUint32(raw[24:], 0xFFFFFFFF)
	require.NoError(t, os.WriteFile(state, raw, 0o644))
	code, _, errs = runK3("run", tinyRelease, "--ids", "4", "--gen", "1", "--load-state", state)
	assert.Equal(t, ExitRuntime, code)
	assert.Contains(t, errs, "checksum mismatch")
	assert.NotContains(t, errs, "memory plan")
}

// cancelAfterRows cancels when the per-step table has its first rows.
type cancelAfterRows struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	rows   int
	cancel func()
}

func (w *cancelAfterRows) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "STEP") {
		w.rows++
		if w.rows == 4 { // header, rule, two rows
			w.cancel()
		}
	}
	return len(p), nil
}

// Audit D19 (row 3.30): a run stopped by Ctrl-C saves a state that holds
// every id its --out lists, the last generated one included.
func TestInterruptedRunSavesTheWholeSequence(t *testing.T) {
	dir := t.TempDir()
	out, state := filepath.Join(dir, "o.json"), filepath.Join(dir, "s")
	var e bytes.Buffer
	c, code := parseRun([]string{tinyRelease, "--ids", "1,2,3", "--gen", "200", "--out", out, "--save-state", state}, io.Discard, &e)
	require.Equal(t, -1, code, e.String())
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelAfterRows{cancel: cancel}
	code = c.run(ctx, w, &e)
	require.Equal(t, ExitInterrupted, code, e.String())
	var rep runReport
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &rep))
	require.Less(t, len(rep.GeneratedIDs), 200)
	n, err := engine.PeekStatePositions(state)
	require.NoError(t, err)
	assert.Equal(t, len(rep.FullIDs), n, "the state holds every id of full_ids")
}

// Audit D23 (row 4.28): k3 chat plans for the loaded conversation, not
// 8192 positions whatever its length.
func TestChatPlansForTheLoadedHistory(t *testing.T) {
	dir := demoModel(t)
	kv := func(args ...string) string {
		stdin = strings.NewReader("")
		defer func() { stdin = nil }()
		code, out, errs := runK3(append([]string{"chat", dir, "--gen", "2"}, args...)...)
		require.Equal(t, ExitOK, code, errs)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "MLA KV cache") {
				return strings.TrimSpace(l)
			}
		}
		t.Fatalf("no MLA line in\n%s", out)
		return ""
	}
	hist := filepath.Join(t.TempDir(), "h.jsonl")
	long := strings.Repeat("word ", 3000)
	require.NoError(t, chat.SaveHistory(hist, []chat.Message{{Role: "user", Content: long}, {Role: "assistant", Content: long}}))
	assert.NotEqual(t, kv(), kv("--history", hist), "the plan does not grow with a 30 KB history")
}
