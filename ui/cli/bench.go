package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"time"

	"k3/doctor/machine"
	"k3/doctor/measure"
	"k3/kernels"
)

// benchCommands are the `k3 bench WHAT` subcommands; each file adds its own
// from an init function (kernels here, layer, stream).
var benchCommands = newRegistry("k3 bench", "unknown benchmark %q (run 'k3 bench --help')", 10)

func init() {
	register("bench", "measure this machine and the engine (k3 bench kernels|...)", runBench)
	benchCommands.add("kernels", "read bandwidth and every kernel at the real K3 shapes", benchKernels)
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
	fs := newFlags("k3 bench kernels", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line instead of a table")
	quick := fs.Bool("quick", false, "short measurements (the whole run in under 40 s)")
	threads := fs.Int("threads", 0, "threads of the multi-threaded measurements (0: physical cores)")
	setUsage(fs, stderr,
		"usage: k3 bench kernels [--json] [--quick] [--threads N]",
		"Measures streaming read bandwidth (1 and N threads), then mat-vec and mat-mat",
		"(T = 1, 8, 32) at the K3 shapes over >1 GiB of weights; K3_PORTABLE=1 measures",
		"the portable Go path.",
	)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 || *threads < 0 {
		fs.Usage()
		return ExitUsage
	}
	start := time.Now()
	enc := json.NewEncoder(stdout)
	cfg := measure.KernelConfig{Quick: *quick, Threads: measure.KernelThreads(*threads)}
	if *jsonOut {
		cfg.Report = func(r measure.KernelResult) { enc.Encode(r) }
	} else {
		fmt.Fprintf(stdout, "k3 bench kernels: level %v, %d physical cores, GOMAXPROCS %d\n",
			kernels.CurrentLevel(), machine.PhysicalCores(), runtime.GOMAXPROCS(0))
		fmt.Fprintf(stdout, "%-15s %-6s %-12s %4s %4s %8s %8s %8s %6s\n",
			"kernel", "dtype", "shape", "T", "thr", "GB/s", "GFLOP/s", "limit", "ratio")
		cfg.Report = func(r measure.KernelResult) {
			shape := ""
			if r.Rows > 0 {
				shape = fmt.Sprintf("%dx%d", r.Rows, r.Cols)
			}
			fmt.Fprintf(stdout, "%-15s %-6s %-12s %4d %4d %8.2f %8.2f %8.2f %6.3f\n",
				r.Kernel, r.DType, shape, r.Tokens, r.Threads, r.GBps, r.GFLOPs, r.LimitGBps, r.Ratio)
		}
		cfg.Log = func(s string) { fmt.Fprintln(stderr, "  "+s) }
	}
	if _, err := measure.Kernels(context.Background(), cfg); err != nil {
		fmt.Fprintf(stderr, "k3 bench kernels: %v\n", err)
		return ExitRuntime
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "done in %.1f s\n", time.Since(start).Seconds())
	}
	return ExitOK
}
