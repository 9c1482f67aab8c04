package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k3/engine"
	"k3/engine/cachesim"
	"k3/storage/units"
)

func init() {
	register("run", "generate from a prompt or ids (greedy), with a per-step report", cmdRun)
}

// textCodec is what `k3 run` needs of a tokenizer.
type textCodec interface {
	Encode(text string) []int
	Decode(ids []int) []byte
}

// afterBind lets tests inject faults into a bound model.
var afterBind func(m *engine.Model)

// loadTokenizer opens the tokenizer in dir; nil until a tokenizer is built in.
var loadTokenizer func(dir string) (textCodec, error)

type runReport struct {
	PromptIDs       []int     `json:"prompt_ids"`
	GeneratedIDs    []int     `json:"generated_ids"`
	FullIDs         []int     `json:"full_ids"`
	TFPred          []int     `json:"tf_pred"`
	StopReason      string    `json:"stop_reason"`
	SecondsPerToken float64   `json:"seconds_per_token"`
	WallSeconds     float64   `json:"wall_seconds"`
	PeakRSSBytes    int64     `json:"peak_rss_bytes"`
	TrunkBytesRead  int64     `json:"trunk_bytes_read"`
	ExpertBytesRead int64     `json:"expert_bytes_read"`
	ExpertDrops     int64     `json:"expert_drops"`
	Layers          int       `json:"layers"`
	LayersInModel   int       `json:"layers_in_model"`
	GeneratedText   *string   `json:"generated_text"`
	StepSeconds     []float64 `json:"step_seconds"`
	PlanBytes       int64     `json:"plan_bytes"`
	IOShare         float64   `json:"io_share"`
	ExpertRequests  int64     `json:"expert_requests"`
	ExpertHits      int64     `json:"expert_hits"`
	ExpertEvictions int64     `json:"expert_evictions"`
}

func peakRSS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	idsFlag := fs.String("ids", "", "token ids, e.g. 1,2,3")
	prompt := fs.String("prompt", "", "prompt text (needs the tokenizer)")
	promptFile := fs.String("prompt-file", "", "read the prompt text from a file")
	tokDir := fs.String("tok", "", "tokenizer directory (default: the model directory)")
	gen := fs.Int("gen", 8, "tokens to generate")
	recompute := fs.Bool("recompute", false, "run the whole prefix every step instead of carrying KV/KDA state")
	tf := fs.Bool("teacher-forcing", false, "one forward over the ids; report the argmax after every position")
	dump := fs.String("dump-logits", "", "write the first generated position's logits (little-endian float32)")
	out := fs.String("out", "", "write a JSON report")
	mf := addModelFlags(fs, "run")
	traceDir := fs.String("dump-cache-trace", "", "write DIR/expert_trace.bin and DIR/expert_hist.json (replay with k3 sim-cache)")
	saveState := fs.String("save-state", "", "write the decode state after the run (resume later with --load-state)")
	loadState := fs.String("load-state", "", "resume from a state file; the prompt continues it")
	var stops intList
	fs.Var(&stops, "stop-id", "stop after emitting this id (repeatable)")
	setUsage(fs, stderr, "usage: k3 run MODEL_DIR (--ids 1,2,3 | --prompt TEXT | --prompt-file PATH) [flags]")
	pos, code := parseN(fs, args, 1, stderr, "k3 run: give exactly one MODEL_DIR (run 'k3 run -h' for the flags)")
	if code >= 0 {
		return code
	}
	dir := pos[0]
	nsrc := 0
	for _, s := range []string{*idsFlag, *prompt, *promptFile} {
		if s != "" {
			nsrc++
		}
	}
	if nsrc != 1 {
		fmt.Fprintln(stderr, "k3 run: give exactly one of --ids, --prompt or --prompt-file")
		return ExitUsage
	}
	if *gen < 0 || *gen > 1<<20 {
		fmt.Fprintf(stderr, "k3 run: --gen %d is outside 0..%d\n", *gen, 1<<20)
		return ExitUsage
	}
	if code := mf.resolve(fs, stdout, stderr); code >= 0 {
		return code
	}
	if *recompute && (*saveState != "" || *loadState != "") {
		fmt.Fprintln(stderr, "k3 run: --save-state and --load-state need the carried state; drop --recompute")
		return ExitUsage
	}
	for _, p := range []string{*out, *dump, *saveState} {
		if p != "" {
			if err := checkWritable(p); err != nil {
				fmt.Fprintf(stderr, "k3 run: cannot write %s: %v\n", p, err)
				return ExitOutput
			}
		}
	}
	var tok textCodec
	var ids []int
	var err error
	if *idsFlag != "" {
		if ids, err = parseIDs(*idsFlag); err != nil {
			fmt.Fprintln(stderr, "k3 run:", err)
			return ExitUsage
		}
	} else {
		text := *prompt
		if *promptFile != "" {
			b, err := os.ReadFile(*promptFile)
			if err != nil {
				fmt.Fprintln(stderr, "k3 run:", err)
				return ExitUsage
			}
			text = string(b)
		}
		if loadTokenizer == nil {
			fmt.Fprintln(stderr, "k3 run: --prompt and --prompt-file need the tokenizer, which this build does not include; use --ids")
			return ExitUsage
		}
		td := *tokDir
		if td == "" {
			td = dir
		}
		if tok, err = loadTokenizer(td); err != nil {
			fmt.Fprintf(stderr, "k3 run: tokenizer: %v\n", err)
			return ExitUsage
		}
		ids = tok.Encode(text)
		fmt.Fprintf(stdout, "  tokenized: %d bytes -> %d ids\n", len(text), len(ids))
		if len(ids) == 0 {
			fmt.Fprintln(stderr, "k3 run: the prompt is empty")
			return ExitUsage
		}
	}

	t0 := time.Now()
	m, set, mplan, code := mf.open(dir, len(ids)+*gen+statePositions(*loadState), *tf, stdout, stderr)
	if code >= 0 {
		return code
	}
	defer set.Close()
	defer m.Close()
	cfg := m.Cfg
	for _, id := range ids {
		if id >= cfg.VocabSize {
			fmt.Fprintf(stderr, "k3 run: token id %d is outside the vocabulary 0..%d\n", id, cfg.VocabSize-1)
			return ExitUsage
		}
	}
	for _, id := range stops {
		if id >= cfg.VocabSize {
			fmt.Fprintf(stderr, "k3 run: --stop-id %d is outside the vocabulary 0..%d\n", id, cfg.VocabSize-1)
			return ExitUsage
		}
	}
	if afterBind != nil {
		afterBind(m)
	}
	var trace []cachesim.Request
	if *traceDir != "" {
		m.Store.Trace = func(layer, expert int) {
			trace = append(trace, cachesim.Request{Layer: int32(layer), Expert: int32(expert)})
		}
	}
	files := set.Files()
	fmt.Fprintf(stdout, "  model    : %s (%d tensors in %d file(s))\n", dir, set.Len(), len(files))
	fmt.Fprintf(stdout, "  trunk    : %s resident, bound in %.2f s\n", units.Bytes(m.TrunkBytes), time.Since(t0).Seconds())
	fmt.Fprintf(stdout, "  prompt   : %d tokens, generating %d\n", len(ids), *gen)

	var st *engine.State
	if *loadState != "" {
		if st, err = m.LoadState(*loadState); err != nil {
			fmt.Fprintf(stderr, "k3 run: --load-state: %v\n", err)
			return ExitRuntime
		}
		fmt.Fprintf(stdout, "  resumed  : %d positions from %s\n", st.Pos, *loadState)
	}

	e, err := engine.NewEngineFor(m, *mf.threads)
	if err != nil {
		fmt.Fprintf(stderr, "k3 run: %v\n", err)
		return ExitRuntime
	}
	defer e.Close()
	e.Chunk = *mf.chunk
	ctx, stop := interruptContext(stderr)
	defer stop()
	start := e.Snapshot()
	last := start

	rep := runReport{PromptIDs: ids, Layers: m.Bound, LayersInModel: cfg.Layers, GeneratedIDs: []int{}, PlanBytes: mplan.Total}
	var runErr error
	var final *engine.State
	if *tf {
		rep.TFPred, runErr = e.TeacherForce(ids)
		rep.FullIDs = ids
		rep.StopReason = "teacher_forcing"
		if runErr == nil {
			agree := 0
			for i := 0; i+1 < len(ids); i++ {
				if rep.TFPred[i] == ids[i+1] {
					agree++
				}
			}
			fmt.Fprintf(stdout, "teacher forcing: %d positions; the argmax matches the next id at %d/%d\n", len(ids), agree, max(len(ids)-1, 0))
			fmt.Fprintf(stdout, "tf_pred: %v\n", rep.TFPred)
		}
	} else {
		fmt.Fprintf(stdout, "%-6s %-10s %-10s %-10s %-10s %s\n", "STEP", "TOKEN", "SECONDS", "CACHE HIT", "READ GB", "TOK/S")
		fmt.Fprintln(stdout, strings.Repeat("-", 62))
		var res *engine.GenResult
		res, runErr = e.Generate(ctx, st, ids, engine.GenOptions{Gen: *gen, StopIDs: stops, Recompute: *recompute,
			OnStep: func(step, id int, sec float64) {
				now := e.Snapshot()
				d := now.Sub(last)
				last = now
				hit := 0.0
				if d.Expert.Requests > 0 {
					hit = 100 * float64(d.Expert.Hits) / float64(d.Expert.Requests)
				}
				fmt.Fprintf(stdout, "%-6d %-10d %-10.3f %-10.1f %-10.3f %.3f\n", step, id, sec, hit,
					float64(d.Expert.BytesRead+d.TrunkBytesRead)/1e9, 1/math.Max(sec, 1e-9))
			}})
		if res != nil {
			final = res.State
			rep.GeneratedIDs = append(rep.GeneratedIDs, res.Generated...)
			rep.StopReason = res.StopReason
			rep.StepSeconds = res.StepSeconds
			for _, s := range res.StepSeconds {
				rep.WallSeconds += s
			}
			if n := len(res.Generated); n > 0 {
				rep.SecondsPerToken = rep.WallSeconds / float64(n)
			}
			if *dump != "" && res.FirstLogits != nil {
				b := make([]byte, 4*len(res.FirstLogits))
				for i, v := range res.FirstLogits {
					binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
				}
				if err := writeAtomic(*dump, b); err != nil {
					fmt.Fprintf(stderr, "k3 run: %v\n", err)
					return ExitOutput
				}
				fmt.Fprintf(stdout, "wrote %s (%d float32 logits)\n", *dump, len(res.FirstLogits))
			}
		}
		var prior []int
		if st != nil && final != nil {
			prior = final.IDs[:len(final.IDs)-len(ids)-max(len(rep.GeneratedIDs)-1, 0)]
			prior = prior[:len(prior):len(prior)]
		}
		rep.FullIDs = append(append(append([]int{}, prior...), ids...), rep.GeneratedIDs...)
		fmt.Fprintln(stdout, strings.Repeat("-", 62))
		if *gen == 0 {
			fmt.Fprintf(stdout, "prefill only: %d positions in the state, 0 tokens generated\n", len(ids)+len(prior))
		}
		fmt.Fprintf(stdout, "%d tokens in %.2f s, %.3f s/token\n", len(rep.GeneratedIDs), rep.WallSeconds, rep.SecondsPerToken)
		if tok != nil {
			text := string(tok.Decode(rep.GeneratedIDs))
			rep.GeneratedText = &text
			fmt.Fprintf(stdout, "\n--- generated text ---\n%s\n----------------------\n", text)
		}
	}
	if *saveState != "" && final != nil && runErr == nil && len(rep.GeneratedIDs) > 0 {
		// feed the last generated token too, so the state holds the whole sequence
		if _, err := e.Feed(final, rep.GeneratedIDs[len(rep.GeneratedIDs)-1:], false); err != nil {
			runErr = err
		}
	}
	if *saveState != "" && final != nil && (runErr == nil || errors.Is(runErr, engine.ErrCancelled)) {
		if err := m.SaveState(*saveState, final); err != nil {
			fmt.Fprintf(stderr, "k3 run: --save-state: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s (%d positions)\n", *saveState, final.Pos)
	}
	if *traceDir != "" {
		if err := os.MkdirAll(*traceDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "k3 run: --dump-cache-trace: %v\n", err)
			return ExitOutput
		}
		tp := filepath.Join(*traceDir, "expert_trace.bin")
		hp := filepath.Join(*traceDir, "expert_hist.json")
		if err := cachesim.WriteTrace(tp, trace); err != nil {
			fmt.Fprintf(stderr, "k3 run: --dump-cache-trace: %v\n", err)
			return ExitOutput
		}
		if err := cachesim.WriteHistogram(hp, m.Bound, m.Cfg.Experts, trace); err != nil {
			fmt.Fprintf(stderr, "k3 run: --dump-cache-trace: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s (%d expert requests) and %s\n", tp, len(trace), hp)
	}
	total := e.Snapshot().Sub(start)
	es := total.Expert
	rep.PeakRSSBytes = peakRSS()
	rep.TrunkBytesRead = m.TrunkBytes + total.TrunkBytesRead
	rep.ExpertBytesRead = es.BytesRead
	rep.ExpertDrops = es.Failures
	rep.ExpertRequests, rep.ExpertHits, rep.ExpertEvictions = es.Requests, es.Hits, es.Evictions
	wall := time.Since(t0).Seconds()
	rep.IOShare = math.Min(1, total.IOWaitSeconds()/math.Max(wall, 1e-9))
	fmt.Fprintf(stdout, "PEAK RSS for the whole run: %s   <- quote this, not the plan (%s planned)\n",
		units.Bytes(rep.PeakRSSBytes), units.Bytes(mplan.Total))
	hitPct := 0.0
	if es.Requests > 0 {
		hitPct = 100 * float64(es.Hits) / float64(es.Requests)
	}
	fmt.Fprintf(stdout, "experts: %d requests, %d served from RAM (%.1f%%), %d evictions, %s read in %.2f s, %d load failure(s)\n",
		es.Requests, es.Hits, hitPct, es.Evictions, units.Bytes(es.BytesRead), es.ReadSeconds, es.Failures)
	fmt.Fprintf(stdout, "trunk: %s bound at load, %s streamed; waited %.2f s for trunk reads\n",
		units.Bytes(m.TrunkBytes), units.Bytes(total.TrunkBytesRead), total.TrunkWaitSeconds)
	fmt.Fprintf(stdout, "I/O share of wall clock: %.1f%% (waiting on trunk %.2f s + experts %.2f s of %.2f s; reads overlapped with compute are not counted)\n",
		100*rep.IOShare, total.TrunkWaitSeconds, es.ReadSeconds, wall)
	if es.NaNScaleGroups > 0 {
		fmt.Fprintf(stdout, "note: %d MXFP4 groups with scale byte 255 (NaN) were read as zero\n", es.NaNScaleGroups)
	}
	for _, n := range m.IONotes() {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if *out != "" {
		b, _ := json.Marshal(rep)
		if err := writeAtomic(*out, append(b, '\n')); err != nil {
			fmt.Fprintf(stderr, "k3 run: %v\n", err)
			return ExitOutput
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
	}
	var ee *engine.ExpertError
	switch {
	case runErr == nil:
		return ExitOK
	case errors.As(runErr, &ee):
		fmt.Fprintf(stderr, "RUN INVALID: %v; refusing partial MoE output\n", runErr)
		return ExitExpertLoad
	case errors.Is(runErr, engine.ErrCancelled):
		fmt.Fprintln(stderr, "k3 run: interrupted; results so far were written")
		return ExitInterrupted
	default:
		fmt.Fprintf(stderr, "k3 run: %v\n", runErr)
		return ExitRuntime
	}
}

// interruptContext is cancelled by the first Ctrl-C (the step in flight
// completes and results are written); a second Ctrl-C exits at once.
func interruptContext(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt)
	go func() {
		n := 0
		for range ch {
			n++
			if n == 1 {
				fmt.Fprintln(stderr, "\ninterrupt: the step in flight will complete, then results are written and k3 exits 5. Press Ctrl-C again to stop now.")
				cancel()
				continue
			}
			os.Exit(130)
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// statePositions peeks at a state file's position count (0 when absent or
// unreadable; the load reports the real error later).
func statePositions(path string) int {
	if path == "" {
		return 0
	}
	n, _ := engine.PeekStatePositions(path)
	return n
}
