package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"k3/doctor/measure"
	"k3/engine"
	"k3/kernels"
	"k3/machine"
)

// benchCommands are the `k3 bench WHAT` subcommands; each file adds its own
// from an init function (kernels here, layer, stream).
var benchCommands = newRegistry("k3 bench", "unknown benchmark %q (run 'k3 bench --help')", 10)

func init() {
	register("bench", "measure this machine and the engine (k3 bench kernels|...)", runBench)
	benchCommands.add("kernels", "read bandwidth, every kernel at the real K3 shapes, small batches vs the FMA roofline (and llama.cpp's ggml)", benchKernels)
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := stdout
		code := ExitOK
		if len(args) == 0 {
			w, code = stderr, ExitUsage
		}
		fmt.Fprintln(w, "usage: k3 bench WHAT [flags]")
		benchCommands.list(w)
		return code
	}
	return benchCommands.dispatch(args, stdout, stderr)
}

func benchKernels(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("kernels", stderr, "one JSON object per line instead of a table", "threads of the multi-threaded measurements (0: physical cores)", "")
	k := kernelBench{b: b, stdout: stdout, stderr: stderr, enc: json.NewEncoder(stdout)}
	k.quick = b.Bool("quick", false, "short measurements (the whole run in under 40 s without a peer)")
	peer := b.String("peer", "", "path of ggml's test-backend-ops, measured beside k3 in the small-batch table")
	batchOnly := b.Bool("batch-only", false, "only the small-batch table (no read bandwidth, no K3 shapes)")
	k.reps = b.Int("reps", 0, "repeats of each small-batch measurement, interleaved (0: 3, --quick 1)")
	setUsage(b.FlagSet, stderr,
		"usage: k3 bench kernels [--json] [--quick] [--threads N] [--peer PATH] [--batch-only] [--reps N]",
		"Measures streaming read bandwidth (1 and N threads), then mat-vec and mat-mat",
		"(T = 1, 8, 32) at the K3 shapes over >1 GiB of weights, then the small-batch",
		"table: the float64 FMA roofline of N threads and bf16 and MXFP4 4096x7168 at",
		"T = 1, 2, 4, 8, 16, 32, 64 tokens with the fraction of the roofline each reaches",
		"and, with --peer, ggml's test-backend-ops at the same shapes in the same run",
		"(interleaved; medians of --reps repeats). K3_PORTABLE=1 measures the portable",
		"Go path. docs/BENCHMARKS.md says how to build test-backend-ops.",
	)
	pos, code := parseArgs(b.FlagSet, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 || *b.threads < 0 || *k.reps < 0 {
		b.Usage()
		return ExitUsage
	}
	start := time.Now()
	ctx := context.Background()
	if *peer != "" {
		var err error
		if k.ggml, err = measure.NewGGML(ctx, *peer); err != nil {
			fmt.Fprintf(stderr, "k3 bench kernels: %v\n", err)
			return ExitUsage
		}
		defer k.ggml.Close()
	}
	if !*b.json {
		fmt.Fprintf(stdout, "k3 bench kernels: level %v, %d physical cores, GOMAXPROCS %d\n",
			kernels.CurrentLevel(), machine.PhysicalCores(), runtime.GOMAXPROCS(0))
	}
	if !*batchOnly {
		if err := k.kernels(ctx); err != nil {
			return b.failed(stderr, err)
		}
	}
	res, err := k.batch(ctx)
	if err != nil {
		return b.failed(stderr, err)
	}
	if !*b.json {
		writeBatchTable(stdout, res)
		fmt.Fprintf(stdout, "done in %.1f s\n", time.Since(start).Seconds())
	}
	return ExitOK
}

// kernelBench is one `k3 bench kernels` run: its flags and where it
// reports (JSON lines, or tables with progress on stderr).
type kernelBench struct {
	b              *benchFlags
	quick          *bool
	reps           *int
	ggml           *measure.GGML // the peer (nil: none)
	stdout, stderr io.Writer
	enc            *json.Encoder
}

// kernels measures the read bandwidth and every kernel at the K3 shapes,
// a line each.
func (k *kernelBench) kernels(ctx context.Context) error {
	cfg := measure.KernelConfig{Quick: *k.quick, Threads: measure.KernelThreads(*k.b.threads)}
	if *k.b.json {
		cfg.Report = func(r measure.KernelResult) { k.enc.Encode(r) }
	} else {
		fmt.Fprintf(k.stdout, "%-15s %-6s %-12s %4s %4s %8s %8s %8s %6s\n",
			"kernel", "dtype", "shape", "T", "thr", "GB/s", "GFLOP/s", "limit", "ratio")
		cfg.Report = func(r measure.KernelResult) {
			shape := ""
			if r.Rows > 0 {
				shape = fmt.Sprintf("%dx%d", r.Rows, r.Cols)
			}
			fmt.Fprintf(k.stdout, "%-15s %-6s %-12s %4d %4d %8.2f %8.2f %8.2f %6.3f\n",
				r.Kernel, r.DType, shape, r.Tokens, r.Threads, r.GBps, r.GFLOPs, r.LimitGBps, r.Ratio)
		}
		cfg.Log = func(s string) { fmt.Fprintln(k.stderr, "  "+s) }
	}
	_, err := measure.Kernels(ctx, cfg)
	return err
}

// batch measures the small-batch table on all threads (beside the peer,
// when there is one).
func (k *kernelBench) batch(ctx context.Context) ([]measure.BatchResult, error) {
	th := measure.KernelThreads(*k.b.threads)
	cfg := measure.BatchConfig{Threads: th[len(th)-1], Reps: *k.reps}
	if *k.quick {
		cfg.MinTime = 150 * time.Millisecond
		if *k.reps == 0 {
			cfg.Reps = 1
		}
	}
	if k.ggml != nil {
		cfg.Peer = k.ggml
	}
	if *k.b.json {
		cfg.Report = func(r measure.BatchResult) { k.enc.Encode(r) }
	} else {
		cfg.Log = func(s string) { fmt.Fprintln(k.stderr, "  "+s) }
	}
	return measure.Batch(ctx, cfg)
}

// writeBatchTable prints the small-batch table: per shape and T, k3's
// median GFLOP/s with its range, its fraction of the float64 FMA roofline
// and, with a peer, the peer's and the ratio.
func writeBatchTable(w io.Writer, res []measure.BatchResult) {
	if len(res) == 0 {
		return
	}
	r0 := res[0]
	fmt.Fprintf(w, "\nsmall batches: %d threads, median of %d interleaved repeats [min-max]; roofline = float64 FMA peak of %d threads measured next to each\n",
		r0.Threads, r0.Reps, r0.Threads)
	peer := r0.Peer != ""
	if peer {
		fmt.Fprintf(w, "peer: %s on %d threads (float32 arithmetic, not exact)\n", r0.Peer, r0.PeerThreads)
		fmt.Fprintf(w, "%-6s %-10s %3s %24s %9s %7s %24s %7s\n", "dtype", "shape", "T", "k3 GFLOP/s", "roofline", "of roof", "peer GFLOP/s", "k3/peer")
	} else {
		fmt.Fprintf(w, "%-6s %-10s %3s %24s %9s %7s\n", "dtype", "shape", "T", "k3 GFLOP/s", "roofline", "of roof")
	}
	for _, r := range res {
		fmt.Fprintf(w, "%-6s %-10s %3d %24s %9.1f %7.3f", r.DType, fmt.Sprintf("%dx%d", r.Rows, r.Cols), r.Tokens,
			fmt.Sprintf("%.1f [%.1f-%.1f]", r.GFLOPs, r.GFLOPsMin, r.GFLOPsMax), r.Roofline, r.Fraction)
		if peer {
			fmt.Fprintf(w, " %24s %7.3f", fmt.Sprintf("%.1f [%.1f-%.1f]", r.PeerGFLOPs, r.PeerMin, r.PeerMax), r.RatioToPeer)
		}
		fmt.Fprintln(w)
	}
}

// The usage of the flags most k3 bench commands share.
const (
	jsonLinesUsage = "one JSON object per line"
	threadsUsage   = "threads (0: physical cores)"
)

// benchFlags are the flags the k3 bench commands share (--json, and
// --threads and --dir for those that take them) and how they report a
// failure, with the command's name.
type benchFlags struct {
	*flag.FlagSet
	name    string // "k3 bench layer"
	json    *bool
	threads *int    // nil without --threads
	dir     *string // nil without --dir
}

// newBenchFlags declares the flags of `k3 bench what`: --json, and
// --threads and --dir when their usage is not "".
func newBenchFlags(what string, stderr io.Writer, jsonUsage, threadsUsage, dirUsage string) *benchFlags {
	b := &benchFlags{name: "k3 bench " + what}
	b.FlagSet = newFlags(b.name, stderr)
	b.json = b.Bool("json", false, jsonUsage)
	if threadsUsage != "" {
		b.threads = b.Int("threads", 0, threadsUsage)
	}
	if dirUsage != "" {
		b.dir = benchDirFlag(b.FlagSet, dirUsage)
	}
	return b
}

// logf writes the measurement's progress lines on w.
func (b *benchFlags) logf(w io.Writer) func(string, ...any) {
	return func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) }
}

// failed says on w why the measurement stopped (a plan that does not fit
// is refused before anything is loaded) and returns the exit code.
func (b *benchFlags) failed(w io.Writer, err error) int {
	var pe *engine.PlanError
	if errors.As(err, &pe) {
		fmt.Fprintf(w, "%s: refused before loading anything: a measurement does not fit this machine: %v\n", b.name, err)
		return ExitRuntime
	}
	fmt.Fprintf(w, "%s: %v\n", b.name, err)
	return ExitRuntime
}

// benchDirFlag declares --dir, the folder under the user's cache where the
// bench commands generate their checkpoints (and reuse them).
func benchDirFlag(fs *flag.FlagSet, usage string) *string {
	cache, _ := os.UserCacheDir()
	return fs.String("dir", filepath.Join(cache, "k3", "bench"), usage)
}
