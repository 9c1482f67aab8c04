package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/assets/demo"
	"k3/doctor/measure"
	"k3/kernels"
	"k3/machine"
)

func init() {
	benchCommands.add("compress", "lossless bf16 compression (BF16C and alternatives) on trained weights: ratio per tensor kind, decode speed", benchCompress)
}

// compressLine is one --json line of `k3 bench compress`: Line says which
// of the embedded parts is set.
type compressLine struct {
	Line string `json:"line"` // ratio, decode, kernel
	*measure.CompressRow
	*measure.DecodeSpeed
	*measure.KernelSpeeds
	// decode lines: the "all" ratio of the trained sources, and the fastest
	// disk whose compressed stream Threads cores decode as fast as it is read
	Ratio     float64 `json:"format_ratio,omitempty"`
	Threads   int     `json:"decode_threads,omitempty"`
	KeepsUpGB float64 `json:"keeps_up_with_disk_gbps,omitempty"`
}

// Kernel matrix of `k3 bench compress`: trained weights tiled to a trunk
// projection's shape (larger than the caches).
const compressKernelRows, compressKernelCols = 4096, 7168

func benchCompress(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("k3 bench compress", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line")
	rounds := fs.Int("rounds", 5, "interleaved rounds of each speed measurement (the median is reported)")
	threads := fs.Int("threads", 0, "threads of the mat-vec measurement (0: physical cores)")
	setUsage(fs, stderr, "usage: k3 bench compress [--json] [--rounds N] [--threads N] [DIR|model.json ...]",
		"Measures lossless bf16 compression on trained weights: the trained demo model, and each",
		"safetensors checkpoint DIR or TensorFlow.js model (model.json, or a DIR of them; float32",
		"weights, rounded to bf16) given. Per source and tensor kind: the ratio of BF16C (the trunk",
		"format), its raw blocks, the exponent entropy, and two alternatives (x3: 3-bit offsets with",
		"exceptions; huff: a Huffman-coded exponent plane); then each format's decode speed on one",
		"core and a mat-vec of BF16C against bf16.")
	rest, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	if *rounds < 1 || *threads < 0 {
		fs.Usage()
		return ExitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "k3 bench compress: %v\n", err)
		return ExitRuntime
	}
	tmp, err := os.MkdirTemp("", "k3-compress-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	if err := demo.Write(tmp); err != nil {
		return fail(err)
	}
	ms, err := measure.CheckpointMatrices(tmp, "demo")
	if err != nil {
		return fail(err)
	}
	for _, a := range rest {
		more, err := compressSources(a)
		if err != nil {
			return fail(err)
		}
		ms = append(ms, more...)
	}

	enc := json.NewEncoder(stdout)
	rows := measure.CompressStats(ms)
	if *jsonOut {
		for i := range rows {
			enc.Encode(compressLine{Line: "ratio", CompressRow: &rows[i]})
		}
	} else {
		fmt.Fprintf(stdout, "%-20s %-11s %7s %9s %6s %6s %6s %5s %6s %6s %6s\n",
			"SOURCE", "KIND", "TENSORS", "WEIGHTS", "BF16C", "BLOCK", "RAW%", "EXP H", "BOUND", "X3", "HUFF")
		for _, r := range rows {
			fmt.Fprintf(stdout, "%-20s %-11s %7d %9d %6.3f %6.3f %6.2f %5.2f %6.3f %6.3f %6.3f\n",
				r.Source, r.Kind, r.Tensors, r.Weights, r.Ratio, r.BlockRatio, 100*r.RawFraction, r.ExponentEntropy, r.EntropyRatio,
				r.Formats[1].Ratio, r.Formats[2].Ratio)
		}
		fmt.Fprintln(stdout, "BF16C: ratio with its 8-byte row offsets; BLOCK: without them (what a 7168-wide row gets); RAW%: full blocks stored raw;")
		fmt.Fprintln(stdout, "EXP H: exponent entropy, bits/weight; BOUND: 16/(8+H), an ideal exponent coder; X3, HUFF: the alternatives' ratios.")
	}

	// one ratio per format over every matrix (the last row of one source:
	// "all", or its only kind): what the decode speeds pair with
	all := measure.CompressStats(relabel(ms, "trained"))
	all = all[len(all)-1:]
	ratio := map[string]float64{"bf16": 1}
	for _, f := range all[0].Formats {
		ratio[f.Format] = f.Ratio
	}
	speeds, err := measure.DecodeSpeeds(ms, *rounds)
	if err != nil {
		return fail(err)
	}
	th := machine.DefaultThreads()
	if *threads > 0 {
		th = *threads
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "\ndecode on one core, every matrix above (Go decoders; logical bf16 GB/s, median of %d interleaved rounds; the machine may be shared):\n", *rounds)
		fmt.Fprintf(stdout, "%-7s %7s %8s %12s  %s\n", "FORMAT", "RATIO", "GB/S", "DISK GB/S", "RUNS")
	}
	for i := range speeds {
		s := &speeds[i]
		keeps := s.GBps * float64(th) / ratio[s.Format]
		if *jsonOut {
			enc.Encode(compressLine{Line: "decode", DecodeSpeed: s, Ratio: ratio[s.Format], Threads: th, KeepsUpGB: keeps})
			continue
		}
		runs := make([]string, len(s.Runs))
		for k, r := range s.Runs {
			runs[k] = fmt.Sprintf("%.2f", r)
		}
		fmt.Fprintf(stdout, "%-7s %7.3f %8.2f %12.2f  %s\n", s.Format, ratio[s.Format], s.GBps, keeps, strings.Join(runs, " "))
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "DISK GB/S: the fastest disk whose compressed stream %d core(s) decode as fast as it is read (GB/s x cores / ratio).\n", th)
	}

	pool := kernels.NewPool(th)
	defer pool.Close()
	m := tileMatrix(ms, compressKernelRows, compressKernelCols)
	minTime := 300 * time.Millisecond
	ks := measure.BF16CKernel(pool, m, *rounds, minTime)
	if *jsonOut {
		enc.Encode(compressLine{Line: "kernel", KernelSpeeds: &ks})
		return ExitOK
	}
	fmt.Fprintf(stdout, "\nmat-vec %dx%d (the weights above tiled), %d thread(s), level %s, median of %d rounds:\n", ks.Rows, ks.Cols, ks.Threads, ks.Level, *rounds)
	fmt.Fprintf(stdout, "  bf16 %.2f GB/s, bf16c %.2f GB/s of logical weights: bf16c takes %.2fx the time of bf16\n", ks.BF16GBps, ks.BF16CGBps, ks.Slowdown)
	fmt.Fprintln(stdout, "  (BF16C runs the kernels' path for this level: the portable Go dot where no SIMD BF16C kernel is built.)")
	return ExitOK
}

// compressSources reads the matrices of one argument of k3 bench compress:
// a safetensors checkpoint directory, a TensorFlow.js model.json, or a
// directory of TensorFlow.js models (every *.json with float32 weights).
func compressSources(arg string) ([]measure.WeightMatrix, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return measure.TFJSMatrices(arg, strings.TrimSuffix(filepath.Base(arg), ".json"))
	}
	if st, _ := filepath.Glob(filepath.Join(arg, "*.safetensors")); len(st) > 0 {
		return measure.CheckpointMatrices(arg, filepath.Base(arg))
	}
	js, _ := filepath.Glob(filepath.Join(arg, "*.json"))
	sort.Strings(js)
	var out []measure.WeightMatrix
	for _, j := range js {
		ms, err := measure.TFJSMatrices(j, strings.TrimSuffix(filepath.Base(j), ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no safetensors checkpoint and no TensorFlow.js model with float32 weights", arg)
	}
	return out, nil
}

// relabel gives every matrix the same source (aliasing the weights).
func relabel(ms []measure.WeightMatrix, source string) []measure.WeightMatrix {
	out := make([]measure.WeightMatrix, len(ms))
	for i, m := range ms {
		m.Source = source
		out[i] = m
	}
	return out
}

// tileMatrix fills a rows x cols bf16 matrix with the matrices' weights,
// one after another and again from the start until it is full.
func tileMatrix(ms []measure.WeightMatrix, rows, cols int) *kernels.Mat {
	m := &kernels.Mat{DType: kernels.BF16, Rows: rows, Cols: cols, BF16: make([]uint16, rows*cols)}
	for n := 0; n < len(m.BF16); {
		for i := range ms {
			n += copy(m.BF16[n:], ms[i].W)
		}
	}
	return m
}
