package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k3/doctor"
	"k3/engine"
	"k3/engine/cachesim"
	"k3/machine"
	"k3/storage/strictjson"
	"k3/storage/units"
	"k3/tokenizer"
)

func init() {
	register("run", "generate from a prompt or ids (greedy), with a per-step report", cmdRun)
}

type runReport struct {
	PromptIDs       []int   `json:"prompt_ids"`
	GeneratedIDs    []int   `json:"generated_ids"`
	FullIDs         []int   `json:"full_ids"`
	TFPred          []int   `json:"tf_pred"`
	StopReason      string  `json:"stop_reason"`
	SecondsPerToken float64 `json:"seconds_per_token"`
	WallSeconds     float64 `json:"wall_seconds"`
	PeakRSSBytes    int64   `json:"peak_rss_bytes"`
	TrunkBytesRead  int64   `json:"trunk_bytes_read"`
	// TrunkCompression is the packed trunk's compression ("" none or no
	// trunk, "BF16C"); trunk_bytes_read counts its stored bytes.
	TrunkCompression string `json:"trunk_compression"`
	ExpertBytesRead  int64  `json:"expert_bytes_read"`
	// DraftStreamed: the draft model (--draft) was streamed, and
	// draft_bytes_read what it read (0 when resident or none).
	DraftStreamed  bool  `json:"draft_streamed"`
	DraftBytesRead int64 `json:"draft_bytes_read"`
	ExpertDrops    int64 `json:"expert_drops"`
	Layers         int   `json:"layers"`
	LayersInModel  int   `json:"layers_in_model"`
	// the C engine's fields (seed-engine-spec.md §4.5): the layers asked
	// for (--layers, else all), those the last forward pass went through
	// (fewer when a routed expert failed to load), the model tables' bytes
	// read during the run (ultra-low-memory mode; 0 when resident), and the
	// --stop-id that stopped the run (-1: none did)
	LayersRequested    int   `json:"layers_requested"`
	LayersCompleted    int   `json:"layers_completed"`
	EmbeddingBytesRead int64 `json:"embedding_bytes_read"`
	LMHeadBytesRead    int64 `json:"lm_head_bytes_read"`
	UltraLowMemory     bool  `json:"ultra_low_memory"`
	StoppedAt          int   `json:"stopped_at"`
	// teacher forcing (--tf-check): positions checked (ids less one), those
	// whose argmax is the next id, and the share (null otherwise)
	TFPositions     *int      `json:"tf_positions"`
	TFMatches       *int      `json:"tf_matches"`
	TFAgreement     *float64  `json:"tf_agreement"`
	GeneratedText   *string   `json:"generated_text"`
	StepSeconds     []float64 `json:"step_seconds"`
	PlanBytes       int64     `json:"plan_bytes"`
	IOShare         float64   `json:"io_share"`
	ExpertRequests  int64     `json:"expert_requests"`
	ExpertHits      int64     `json:"expert_hits"`
	ExpertEvictions int64     `json:"expert_evictions"`
	// speculative decoding: draft tokens verified and accepted, and the
	// forwards through the layers (prefill chunks included)
	SpecDrafted   int64 `json:"spec_drafted"`
	SpecAccepted  int64 `json:"spec_accepted"`
	ForwardPasses int64 `json:"forward_passes"`
	// PrefillChunk is the prompt positions read per pass (the memory
	// plan's, or --chunk) and PrefillPasses the passes the prompt took.
	PrefillChunk  int `json:"prefill_chunk"`
	PrefillPasses int `json:"prefill_passes"`
}

// runConfig is a parsed `k3 run` command line.
type runConfig struct {
	dir                                          string
	ids, stops                                   []int
	tok                                          *tokenizer.Tokenizer // nil with --ids and no tokenizer
	gen                                          int
	recompute, teacherForcing                    bool
	dumpLogits, out, traceDir, saveState, loadSt string
	threads                                      int
	mf                                           *modelFlags
	cf                                           *cacheFlags
	// cache is the prompt cache (nil: off, or not used by this run)
	cache  engine.PromptCache
	images []runImage // --image, before the prompt text
	// opts are the engine options the flags give (tests add fault hooks).
	opts engine.Options
	// soFar is what the generation produced, for a second Ctrl-C.
	soFar struct {
		sync.Mutex
		prior, gen []int
		steps      []float64
	}
}

// writeSoFar writes --out with the tokens generated so far, when a second
// Ctrl-C stops the run without waiting for the step in flight.
func (c *runConfig) writeSoFar(stderr io.Writer) {
	c.soFar.Lock()
	rep := runReport{PromptIDs: c.ids, GeneratedIDs: slices.Clone(c.soFar.gen), StopReason: engine.StopCancelled.String(),
		StepSeconds: slices.Clone(c.soFar.steps), PeakRSSBytes: machine.PeakRSS()}
	rep.FullIDs = slices.Concat(c.soFar.prior, c.ids, rep.GeneratedIDs)
	c.soFar.Unlock()
	if rep.GeneratedIDs == nil {
		rep.GeneratedIDs = []int{}
	}
	rep.WallSeconds = sum(rep.StepSeconds)
	what := "nothing else was written"
	if c.out != "" {
		b, _ := strictjson.Marshal(rep)
		if err := writeAtomic(c.out, append(b, '\n')); err != nil {
			what = fmt.Sprintf("writing %s failed: %v", c.out, err)
		} else {
			what = fmt.Sprintf("wrote %s with the %d token(s) generated so far", c.out, len(rep.GeneratedIDs))
		}
	}
	if c.saveState != "" {
		what += "; the decode state was not saved (the step in flight did not finish)"
	}
	fmt.Fprintf(stderr, "\nk3 run: stopped at once by a second Ctrl-C: %s\n", what)
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	c, code := parseRun(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := interruptContext(stderr, func() { c.writeSoFar(stderr) })
	defer stop()
	return c.run(ctx, stdout, stderr)
}

// runResult is what a run did, for the report.
type runResult struct {
	m       *engine.Model
	gen     *engine.GenResult // nil with teacher forcing
	tfPred  []int
	final   *engine.State
	trace   []cachesim.Request
	stats   engine.Stats
	wall    float64
	err     error
	outcode int // an output file could not be written: its exit code
	// prefillPasses are the passes that read the prompt
	prefillPasses int
}

// run opens the model, runs the command and writes the report; it returns
// the exit code.
func (c *runConfig) run(ctx context.Context, stdout, stderr io.Writer) int {
	t0 := time.Now()
	res := &runResult{}
	if c.traceDir != "" {
		c.opts.Trace = func(layer, expert int) {
			res.trace = append(res.trace, cachesim.Request{Layer: int32(layer), Expert: int32(expert)})
		}
	}
	m, code := c.openWatched(ctx, stdout, stderr)
	if code >= 0 {
		return code
	}
	defer m.Close()
	// the collector keeps the heap within the plan (a long prefill chunk
	// leaves a chunk of garbage per layer); restored when the run ends
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(m.HeapLimit()))
	res.m = m
	cfg := m.Cfg
	for _, id := range c.ids {
		if id >= cfg.VocabSize {
			fmt.Fprintf(stderr, "k3 run: token id %d is outside the vocabulary 0..%d\n", id, cfg.VocabSize-1)
			return ExitUsage
		}
	}
	for _, id := range c.stops {
		if id >= cfg.VocabSize {
			fmt.Fprintf(stderr, "k3 run: --stop-id %d is outside the vocabulary 0..%d\n", id, cfg.VocabSize-1)
			return ExitUsage
		}
	}
	fmt.Fprintf(stdout, "  model    : %s (%d tensors in %d file(s))\n", c.dir, m.Tensors(), len(m.Files()))
	fmt.Fprintf(stdout, "  trunk    : %s resident, bound in %.2f s\n", units.Bytes(m.BoundBytes), time.Since(t0).Seconds())
	fmt.Fprintf(stdout, "peak RSS after loading weights: %s (the plan above is a forecast, this is measured)\n", units.Bytes(machine.PeakRSS()))
	if kind, n, un := m.TrunkCompression(); kind != "" {
		fmt.Fprintf(stdout, "  packed   : compressed (%s, lossless), trunk.bin %s of %s uncompressed: %.3fx smaller\n", kind, units.Bytes(n), units.Bytes(un), float64(un)/float64(n))
	}
	if c.teacherForcing {
		fmt.Fprintf(stdout, "  prompt   : %d tokens, teacher forcing (one forward, nothing generated)\n", len(c.ids))
	} else {
		fmt.Fprintf(stdout, "  prompt   : %d tokens, generating %d\n", len(c.ids), c.gen)
	}
	var st *engine.State
	if c.loadSt != "" {
		var err error
		if st, err = m.LoadState(c.loadSt); err != nil {
			fmt.Fprintf(stderr, "k3 run: --load-state: %v\n", err)
			return ExitRuntime
		}
		fmt.Fprintf(stdout, "  resumed  : %d positions from %s\n", st.Pos, c.loadSt)
	}
	if !c.teacherForcing && !c.recompute {
		pc, err := c.cf.open("run", m, c.opts, stdout, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "k3 run: --prompt-cache: %v\n", err)
			return ExitUsage
		}
		if pc != nil {
			c.cache = pc
		}
	}
	e := m.NewEngine(c.threads)
	defer e.Close()
	start := e.Snapshot()
	var ierr error
	if st, ierr = c.giveRunImages(ctx, e, st, stdout, stderr); ierr != nil {
		fmt.Fprintf(stderr, "k3 run: %v\n", ierr)
		if errors.Is(ierr, engine.ErrNoVision) {
			return ExitUsage
		}
		return ExitRuntime
	}
	c.execute(ctx, e, st, res, stdout)
	res.stats = e.Snapshot().Sub(start)
	res.wall = time.Since(t0).Seconds()
	if res.outcode == 0 {
		res.outcode = c.writeFiles(res, stdout, stderr)
	}
	return c.report(res, stdout, stderr)
}

// execute runs teacher forcing or generation, printing a line per step.
func (c *runConfig) execute(ctx context.Context, e *engine.Engine, st *engine.State, res *runResult, stdout io.Writer) {
	if c.teacherForcing {
		res.tfPred, res.err = e.TeacherForce(ctx, c.ids)
		if res.err == nil {
			n, agree, share := tfAgreement(c.ids, res.tfPred)
			fmt.Fprintf(stdout, "teacher forcing: %d positions; the argmax matches the next id at %d/%d (%.1f%%)\n", len(c.ids), *agree, *n, 100**share)
			fmt.Fprintf(stdout, "tf_pred: %v\n", res.tfPred)
		}
		return
	}
	prefill := newPrefillPrinter(stdout)
	header := false
	last := e.Snapshot()
	base := 0 // positions before the prompt (a loaded state's)
	if st != nil {
		base = st.Pos
		c.soFar.Lock()
		c.soFar.prior = slices.Clone(st.IDs)
		c.soFar.Unlock()
	}
	var first engine.Stats // at the first token: what decoding read comes after
	res.gen, res.err = e.Generate(ctx, st, c.ids, engine.GenOptions{MaxTokens: c.gen, StopIDs: c.stops,
		Recompute: c.recompute, Complete: c.saveState != "", Spec: c.mf.spec, Cache: c.cacheUse(st),
		OnEvent: func(ev engine.Event) {
			switch ev.Kind {
			case engine.EventPrefill:
				prefill.add(ev)
			case engine.EventToken:
				c.soFar.Lock()
				c.soFar.gen = append(c.soFar.gen, ev.Token)
				c.soFar.steps = append(c.soFar.steps, ev.Seconds)
				c.soFar.Unlock()
				if !header {
					fmt.Fprintf(stdout, "%-6s %-10s %-10s %-10s %-10s %s\n", "STEP", "TOKEN", "SECONDS", "CACHE HIT", "READ GB", "TOK/S")
					fmt.Fprintln(stdout, strings.Repeat("-", 62))
					header = true
				}
				if ev.Step == 0 {
					first = ev.Stats
				}
				d := ev.Stats.Sub(last)
				last = ev.Stats
				hit, _ := d.HitRate()
				fmt.Fprintf(stdout, "%-6d %-10d %-10.3f %-10.1f %-10.3f %.3f\n", ev.Step, ev.Token, ev.Seconds, 100*hit,
					float64(d.BytesRead())/1e9, 1/math.Max(ev.Seconds, 1e-9))
			}
		}})
	res.final = res.gen.State
	g := res.gen
	res.prefillPasses = prefill.last.Pass
	fmt.Fprintln(stdout, strings.Repeat("-", 62))
	if c.cache != nil {
		fmt.Fprintln(stdout, promptCacheLine(g, len(c.ids), base, errors.Is(res.err, context.Canceled)))
	}
	if c.gen == 0 {
		fmt.Fprintf(stdout, "prefill only: %d positions in the state, 0 tokens generated\n", g.State.Pos)
	}
	fmt.Fprintf(stdout, "%d tokens in %.2f s, %.3f s/token\n", len(g.Generated), sum(g.StepSeconds), g.SecondsPerToken())
	if n := len(g.Generated); n > 0 {
		d := g.Stats
		line := fmt.Sprintf("speculation %s: %d drafted, %d accepted", c.mf.spec, d.SpecDrafted, d.SpecAccepted)
		if c.recompute {
			line = "speculation: none under --recompute (every step runs the whole prefix)"
		}
		if d.SpecDrafted > 0 {
			line += fmt.Sprintf(" (%.0f%%)", 100*float64(d.SpecAccepted)/float64(d.SpecDrafted))
		}
		line += fmt.Sprintf(", %.2f accepted per pass, %.2f passes per token", g.AcceptedPerPass(), g.PassesPerToken())
		if n > 1 {
			line += fmt.Sprintf(", %s read per token after the first", units.Bytes(last.Sub(first).BytesRead()/int64(n-1)))
		}
		fmt.Fprintln(stdout, line)
	}
	if c.tok != nil {
		fmt.Fprintf(stdout, "\n--- generated text ---\n%s\n----------------------\n", c.tok.Decode(g.Generated))
	}
}

// promptCacheLine says how much of the prompt (n ids after base
// positions) the prompt cache gave and how much was read: after a Ctrl-C
// while reading it, the positions the state holds, not the whole prompt.
func promptCacheLine(g *engine.GenResult, n, base int, cancelled bool) string {
	read := n - g.Reused
	if cancelled && len(g.Generated) == 0 && g.State != nil {
		read = max(0, min(read, g.State.Pos-base-g.Reused))
	}
	line := fmt.Sprintf("prompt cache: reused %d of %d prompt positions, read %d", g.Reused, n, read)
	if g.Reused+read < n {
		line += fmt.Sprintf(" (interrupted: %d not read)", n-g.Reused-read)
	}
	return line
}

// cacheUse is the run's use of the prompt cache (nil when off): with a
// tokenizer, snapshots at the prompt's message boundaries too.
func (c *runConfig) cacheUse(st *engine.State) *engine.CacheUse {
	if c.cache == nil {
		return nil
	}
	u := &engine.CacheUse{Cache: c.cache}
	if c.tok != nil {
		base := 0
		if st != nil {
			base = st.Pos
		}
		u.Marks = engine.MessageMarks(c.ids, base, c.tok.StopIDs())
	}
	return u
}

// prefillPrinter prints prefill progress after every pass: a long
// prompt shows it moving (a 173,627-id prompt read 64 positions at a time
// used to print only every tenth of the prompt: seconds without a line),
// with the passes left and their time at the mean pass time so far.
type prefillPrinter struct {
	w     io.Writer
	clock doctor.PrefillClock
	last  doctor.PrefillStatus
}

func newPrefillPrinter(w io.Writer) *prefillPrinter {
	p := &prefillPrinter{w: w}
	p.clock.Begin(time.Now())
	return p
}

func (p *prefillPrinter) add(ev engine.Event) {
	p.last = p.clock.Observe(ev.Done, ev.Total, ev.Reused, ev.Chunk, time.Now())
	fmt.Fprintf(p.w, "  prefill  : %s\n", passLine(p.last))
}

// passLine says how far the prompt's reading is: positions, passes, the
// seconds so far and, while passes are left, their estimated time.
func passLine(st doctor.PrefillStatus) string {
	line := fmt.Sprintf("%d/%d positions, pass %d/%d, %.2f s", st.Done, st.Total, st.Pass, st.Passes, st.Elapsed)
	if st.Pass > 0 && st.Pass < st.Passes {
		line += fmt.Sprintf(", about %.0f s left", st.Left)
	}
	return line
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// writeFiles writes --dump-logits, --save-state and --dump-cache-trace; it
// returns an exit code for a file that could not be written, else 0.
func (c *runConfig) writeFiles(res *runResult, stdout, stderr io.Writer) int {
	if g := res.gen; c.dumpLogits != "" && g != nil && g.FirstLogits != nil {
		b := make([]byte, 4*len(g.FirstLogits))
		for i, v := range g.FirstLogits {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		if err := writeAtomic(c.dumpLogits, b); err != nil {
			fmt.Fprintf(stderr, "k3 run: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s (%d float32 logits)\n", c.dumpLogits, len(g.FirstLogits))
	}
	if c.saveState != "" && res.final != nil && (res.err == nil || errors.Is(res.err, context.Canceled)) {
		if err := res.m.SaveState(c.saveState, res.final); err != nil {
			fmt.Fprintf(stderr, "k3 run: --save-state: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s (%d positions)\n", c.saveState, res.final.Pos)
	}
	if c.traceDir != "" {
		fail := func(err error) int {
			fmt.Fprintf(stderr, "k3 run: --dump-cache-trace: %v\n", err)
			return ExitOutput
		}
		if err := os.MkdirAll(c.traceDir, 0o755); err != nil {
			return fail(err)
		}
		tp := filepath.Join(c.traceDir, "expert_trace.bin")
		hp := filepath.Join(c.traceDir, "expert_hist.json")
		if err := cachesim.WriteTrace(tp, res.trace); err != nil {
			return fail(err)
		}
		if err := cachesim.WriteHistogram(hp, res.m.Bound, res.m.Cfg.Experts, res.trace); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "wrote %s (%d expert requests) and %s\n", tp, len(res.trace), hp)
	}
	return 0
}

// report prints the totals, writes --out and maps the outcome to an exit code.
func (c *runConfig) report(res *runResult, stdout, stderr io.Writer) int {
	m, total := res.m, res.stats
	es := total.Expert
	rep := runReport{PromptIDs: c.ids, Layers: m.Bound, LayersInModel: m.Cfg.Layers, GeneratedIDs: []int{}, PlanBytes: m.Plan.Total,
		PeakRSSBytes: machine.PeakRSS(), TrunkBytesRead: m.BoundBytes + total.TrunkBytesRead, ExpertBytesRead: es.BytesRead,
		ExpertDrops: es.Failures, ExpertRequests: es.Requests, ExpertHits: es.Hits, ExpertEvictions: es.Evictions,
		IOShare: total.IOShare(res.wall), SpecDrafted: total.SpecDrafted, SpecAccepted: total.SpecAccepted, ForwardPasses: total.ForwardPasses,
		PrefillChunk: m.Chunk(), PrefillPasses: res.prefillPasses}
	rep.TrunkCompression, _, _ = m.TrunkCompression()
	if g := res.gen; g != nil {
		rep.GeneratedIDs = append(rep.GeneratedIDs, g.Generated...)
		rep.FullIDs = g.FullIDs()
		rep.StopReason = g.Stop.String()
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			rep.StopReason = "error" // the run failed: it did not reach its length
		}
		rep.StepSeconds = g.StepSeconds
		rep.WallSeconds = sum(g.StepSeconds)
		rep.SecondsPerToken = g.SecondsPerToken()
		if c.tok != nil {
			text := string(c.tok.Decode(g.Generated))
			rep.GeneratedText = &text
		}
	} else {
		rep.TFPred, rep.FullIDs, rep.StopReason = res.tfPred, c.ids, "teacher_forcing"
		rep.TFPositions, rep.TFMatches, rep.TFAgreement = tfAgreement(c.ids, res.tfPred)
	}
	c.cFields(&rep, res)
	fmt.Fprintf(stdout, "PEAK RSS for the whole run: %s   <- quote this, not the plan (%s planned)\n",
		units.Bytes(rep.PeakRSSBytes), units.Bytes(m.Plan.Total))
	hit, _ := total.HitRate()
	fmt.Fprintf(stdout, "experts: %d requests, %d served from RAM (%.1f%%), %d evictions, %s read in %.2f s, %d load failure(s)\n",
		es.Requests, es.Hits, 100*hit, es.Evictions, units.Bytes(es.BytesRead), es.ReadSeconds, es.Failures)
	packed := ""
	if rep.TrunkCompression != "" {
		packed = " (compressed " + rep.TrunkCompression + " bytes as stored)"
	}
	fmt.Fprintf(stdout, "trunk: %s bound at load, %s streamed%s (%s over the run); waited %.2f s for trunk reads\n",
		units.Bytes(m.BoundBytes), units.Bytes(total.TrunkBytesRead), packed, units.PerSec(float64(total.TrunkBytesRead)/max(res.wall, 1e-9)), total.TrunkWaitSeconds)
	trunkReadLine(stdout, total)
	draftReadLine(stdout, &rep, m, total)
	fmt.Fprintf(stdout, "I/O share of wall clock: %.1f%% (waiting on trunk %.2f s + experts %.2f s of %.2f s; reads overlapped with compute are not counted)\n",
		100*rep.IOShare, total.TrunkWaitSeconds, es.ReadSeconds, res.wall)
	if es.NaNScaleGroups > 0 {
		fmt.Fprintf(stdout, "note: %d MXFP4 groups with scale byte 255 (NaN) were read as zero\n", es.NaNScaleGroups)
	}
	notes := m.IONotes()
	fmt.Fprintln(stdout, ioModeLine(notes))
	for _, n := range notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if c.out != "" {
		b, _ := strictjson.Marshal(rep)
		if err := writeAtomic(c.out, append(b, '\n')); err != nil {
			fmt.Fprintf(stderr, "k3 run: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s\n", c.out)
	}
	if res.outcode != 0 {
		return res.outcode
	}
	return exitFor(stderr, "run", res.err)
}

// exitFor reports a run's error and maps it to the exit code.
func exitFor(stderr io.Writer, cmd string, err error) int {
	var ee *engine.ExpertError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "RUN INVALID: %v; refusing partial MoE output\n", err)
		return ExitExpertLoad
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "k3 %s: interrupted; results so far were written\n", cmd)
		return ExitInterrupted
	default:
		fmt.Fprintf(stderr, "k3 %s: %v\n", cmd, err)
		return ExitRuntime
	}
}

// openModel opens a run's model (tests replace it).
var openModel = (*modelFlags).open

// openWatched opens the model. A Ctrl-C while it loads ends k3 at once
// (exit 5), as in the C engine: nothing has run, so there is nothing to
// write, and binding a resident trunk can read for minutes before the
// first layer would see the interrupt.
func (c *runConfig) openWatched(ctx context.Context, stdout, stderr io.Writer) (*engine.Model, int) {
	loaded := make(chan struct{})
	var done atomic.Bool // checked, not only selected: a watcher first
	// scheduled after the load and a later Ctrl-C sees both channels ready
	go func() {
		select {
		case <-ctx.Done():
			if !done.Load() {
				fmt.Fprintln(stderr, "k3 run: interrupted while loading the model: nothing was run, no report written")
				exitNow(ExitInterrupted)
			}
		case <-loaded:
		}
	}()
	m, code := openModel(c.mf, c.dir, c.opts, stdout, stderr)
	done.Store(true)
	close(loaded)
	return m, code
}

// exitNow ends the process at a second Ctrl-C (tests replace it).
var exitNow = os.Exit

// interruptContext is cancelled by the first Ctrl-C (the forward stops before
// its next layer and results are written); a second Ctrl-C calls onSecond
// (which writes what it can of what was done) and exits 5 at once.
func interruptContext(stderr io.Writer, onSecond func()) (context.Context, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt)
	ctx, cancel := watchInterrupts(ch, stderr, onSecond)
	return ctx, func() { signal.Stop(ch); cancel() }
}

func watchInterrupts(ch <-chan os.Signal, stderr io.Writer, onSecond func()) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		n := 0
		for range ch {
			n++
			if n == 1 {
				fmt.Fprintln(stderr, "\ninterrupt: stopping before the next layer; results so far are written and k3 exits 5. Press Ctrl-C again to stop now.")
				cancel()
				continue
			}
			if onSecond != nil {
				onSecond()
			}
			exitNow(ExitInterrupted)
			return
		}
	}()
	return ctx, cancel
}
