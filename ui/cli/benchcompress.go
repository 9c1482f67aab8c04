package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"k3/doctor/bench"
)

func init() {
	benchCommands.add("compress", "lossless bf16 compression (BF16C and alternatives) on trained weights: ratio per tensor kind, decode speed", benchCompress)
}

func benchCompress(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("compress", stderr, jsonLinesUsage, "threads of the mat-vec measurement (0: physical cores)", "")
	fs, jsonOut, threads := b.FlagSet, b.json, b.threads
	rounds := fs.Int("rounds", 5, "interleaved rounds of each speed measurement (the median is reported)")
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
	fail := func(err error) int { return b.failed(stderr, err) }
	ms, rows, err := bench.CompressRatios(rest)
	if err != nil {
		return fail(err)
	}
	enc := json.NewEncoder(stdout)
	if *jsonOut {
		for i := range rows {
			enc.Encode(bench.CompressLine{Line: "ratio", CompressRow: &rows[i]})
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
	decodes, kernel, err := bench.CompressSpeeds(ms, *rounds, *threads)
	if err != nil {
		return fail(err)
	}
	if *jsonOut {
		for _, l := range decodes {
			enc.Encode(l)
		}
		enc.Encode(kernel)
		return ExitOK
	}
	th := decodes[0].Threads
	fmt.Fprintf(stdout, "\ndecode on one core, every matrix above (Go decoders; logical bf16 GB/s, median of %d interleaved rounds; the machine may be shared):\n", *rounds)
	fmt.Fprintf(stdout, "%-7s %7s %8s %12s  %s\n", "FORMAT", "RATIO", "GB/S", "DISK GB/S", "RUNS")
	for _, l := range decodes {
		fmt.Fprintf(stdout, "%-7s %7.3f %8.2f %12.2f  %s\n", l.Format, l.Ratio, l.GBps, l.KeepsUpGB, floats(l.Runs))
	}
	fmt.Fprintf(stdout, "DISK GB/S: the fastest disk whose compressed stream %d core(s) decode as fast as it is read (GB/s x cores / ratio).\n", th)
	ks := kernel.KernelSpeeds
	fmt.Fprintf(stdout, "\nmat-vec %dx%d (the weights above tiled), %d thread(s), level %s, median of %d rounds:\n", ks.Rows, ks.Cols, ks.Threads, ks.Level, *rounds)
	fmt.Fprintf(stdout, "  bf16 %.2f GB/s, bf16c %.2f GB/s of logical weights: bf16c takes %.2fx the time of bf16\n", ks.BF16GBps, ks.BF16CGBps, ks.Slowdown)
	fmt.Fprintln(stdout, "  (BF16C runs the kernels' path for this level: the portable Go dot where no SIMD BF16C kernel is built.)")
	return ExitOK
}
