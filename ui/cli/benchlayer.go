package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"k3/doctor/bench"
	"k3/doctor/measure"
	"k3/storage/units"
)

func init() {
	benchCommands.add("layer", "per-layer decode time at the real K3 width, resident and streamed; overlap and projected s/token per preset, with and without BF16C", benchLayer)
}

// benchLayerSpec is the checkpoint k3 bench layer generates (tests use a
// small one).
var benchLayerSpec = measure.LayerSpec

func benchLayer(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("layer", stderr, jsonLinesUsage, threadsUsage, "where the real-width checkpoint is generated (reused; ~10 GB + trunk)")
	tokens := b.Int("tokens", 8, "decode steps measured (the per-layer times are their mean)")
	ovTokens := b.Int("overlap-tokens", 4, "decode steps of each overlap measurement")
	rounds := b.Int("rounds", 3, "rounds of the overlap and BF16C kernel measurements (the median is reported)")
	setUsage(b.FlagSet, stderr, "usage: k3 bench layer [--json] [--threads N] [--tokens N] [--overlap-tokens N] [--rounds N] [--dir PATH]",
		"Generates (once, ~10 GB) a 3-layer checkpoint at the real K3 width, then measures each layer's",
		"decode time resident and streamed from disk against this machine's RAM and disk speed,",
		"prefill, a streamed decode per preset with the ring the preset's plan allows (measured s/token",
		"next to max(read, compute) of the same run: the overlap efficiency), BF16C's mat-vec speed",
		"against bf16, and the projected seconds per token of the full model at each preset, with and",
		"without the streamed trunk in BF16C.")
	if _, code := parseArgs(b.FlagSet, args); code >= 0 {
		return code
	}
	if *ovTokens < 1 || *rounds < 1 || *b.threads < 0 {
		b.Usage()
		return ExitUsage
	}
	rep, err := bench.Layer(context.Background(), bench.LayerConfig{Dir: *b.dir, Spec: benchLayerSpec(), Threads: *b.threads, Tokens: *tokens,
		OverlapTokens: *ovTokens, Rounds: *rounds, Logf: b.logf(stderr)})
	if err != nil {
		return b.failed(stderr, err)
	}
	if *b.json {
		enc := json.NewEncoder(stdout)
		for _, l := range rep.Lines {
			enc.Encode(l)
		}
		for _, l := range rep.Presets {
			enc.Encode(l)
		}
		return ExitOK
	}
	printLayerTimes(stdout, rep)
	printPresetRuns(stdout, rep.Presets, *ovTokens, *rounds)
	printBF16C(stdout, rep)
	printProjection(stdout, rep)
	return ExitOK
}

// printLayerTimes prints the machine's RAM and disk speed and each layer's
// decode time, resident and streamed, against its limit, and the prefill.
func printLayerTimes(w io.Writer, rep *bench.LayerReport) {
	r := rep.Result
	fmt.Fprintf(w, "RAM read %.1f GB/s (%d threads; %s)\ndisk O_DIRECT read %.2f GB/s (%s)\n\n", r.RAMGBps, r.Threads, rep.RAMNote, r.DiskGBps, rep.DiskNote)
	fmt.Fprintf(w, "%-9s %-10s %10s %10s %10s %7s\n", "MODE", "LAYER", "MB/TOKEN", "S/TOKEN", "LIMIT S", "RATIO")
	for _, l := range rep.Lines {
		if l.Kind == "resident" || l.Kind == "streamed" {
			fmt.Fprintf(w, "%-9s %-10s %10.1f %10.3f %10.3f %7.2f\n", l.Kind, l.Layer, float64(l.Bytes)/1e6, l.Seconds, l.LimitSeconds, l.Ratio)
		}
	}
	fmt.Fprintf(w, "(streamed: caches dropped, %d trunk ring slot(s), so no read-ahead; the smallest expert cache)\n", r.StreamRingSlots)
	fmt.Fprintf(w, "\nprefill: %.1f tokens/s (%d-token chunk through the 3 layers)\n", r.PrefillTokensPerS, r.PrefillTokens)
}

// printPresetRuns prints the streamed decode per preset: the ring its plan
// allows, the measured s/token next to max(read, compute), the overlap
// efficiency.
func printPresetRuns(w io.Writer, presets []bench.PresetLine, ovTokens, rounds int) {
	fmt.Fprintf(w, "\nstreamed decode per preset (the 3 benchmark layers, the smallest expert cache; %d tokens a run, the run of median efficiency of %d):\n", ovTokens, rounds)
	fmt.Fprintf(w, "%-12s %-18s %-33s %-6s %8s %7s %8s %7s %6s  %s\n", "PRESET", "K3 RING, IN FLIGHT", "MEASURED WITH", "IN FL.", "S/TOKEN", "READ S", "COMPUTE", "MAX S", "EFF.", "EFF. RUNS")
	for _, l := range presets {
		k3ring := "none (all pinned)"
		if l.RingSlots > 0 {
			k3ring = fmt.Sprintf("%s x%d, %d/%d", units.Bytes(l.RingBytes), l.RingSlots, l.InFlight, l.StreamedLayers)
		}
		inFl := "-"
		if l.BenchStreamedLayers > 0 {
			inFl = fmt.Sprintf("%d/%d", l.BenchInFlight, l.BenchStreamedLayers)
		}
		fmt.Fprintf(w, "%-12s %-18s %-33s %-6s %8.2f %7.2f %8.2f %7.2f %6.2f  %s\n", l.Preset, k3ring, l.Case, inFl, l.MeasuredSeconds, l.ReadSeconds, l.ComputeSeconds,
			math.Max(l.ReadSeconds, l.ComputeSeconds), l.OverlapEfficiency, floats(l.EfficiencyRuns))
	}
	fmt.Fprintln(w, "(IN FLIGHT: streamed layers whose successor is read while they compute. READ S: time some read was in flight; COMPUTE: time the")
	fmt.Fprintln(w, "forward did not wait for one; EFF. = max(READ, COMPUTE) / S/TOKEN, 1 = perfect overlap; the target is >= 1/1.15 = 0.87.)")
	for _, l := range presets {
		if l.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", l.Preset, l.Note)
		}
	}
	if l, ok := presetByName(presets, "laptop"); ok && l.RingSlots > 1 {
		fmt.Fprintf(w, "  at the 8 GB floor (laptop) K3's plan reads the next layer while one computes at %d of its %d streamed layers.\n", l.InFlight, l.StreamedLayers)
	}
}

// printBF16C prints BF16C's mat-vec speed against bf16 and the released
// trunk's ratio.
func printBF16C(w io.Writer, rep *bench.LayerReport) {
	r, k := rep.Result, rep.Result.Kernel
	fmt.Fprintf(w, "\nBF16C: mat-vec of %s at level %s, %d threads: bf16 %.2f GB/s, bf16c %.2f GB/s of logical weights (%.2fx the time; median of %d)\n",
		rep.KernelMatrix, k.Level, k.Threads, k.BF16GBps, k.BF16CGBps, k.Slowdown, len(k.BF16Runs))
	fmt.Fprintf(w, "the released trunk in BF16C, at %s: %.3fx fewer bytes (that matrix's own synthetic weights: %.3fx)\n", rep.TrainedNote, rep.TrunkRatio, r.KernelRatio)
}

// printProjection prints the full model's projected s/token per preset,
// with the streamed trunk in bf16 and in BF16C.
func printProjection(w io.Writer, rep *bench.LayerReport) {
	fmt.Fprintf(w, "\nprojected full model (1 dense + 68 KDA + 24 MLA layers, lm_head), compute %.1f s/token resident:\n", rep.Compute)
	fmt.Fprintf(w, "%-12s %9s %9s %9s %10s | %8s %9s %9s %7s %10s\n", "PRESET", "S/TOKEN", "IF OVERL.", "AT EFF.", "TRUNK GB", "BF16C GB", "IF OVERL.", "AT EFF.", "BYTES", "PAYS AT")
	for _, l := range rep.Presets {
		fewer, pays := "-", "-"
		if l.CompressedTrunkBytes > 0 {
			fewer = fmt.Sprintf("%.2fx", float64(l.StreamedTrunkBytes)/float64(l.CompressedTrunkBytes))
			pays = fmt.Sprintf("%.1f GB/s", l.BreakEvenGBps)
		}
		fmt.Fprintf(w, "%-12s %9.1f %9.1f %9.1f %10.1f | %8.1f %9.1f %9.1f %7s %10s\n", l.Preset, l.Seconds, l.LimitSeconds, l.ProjectedSeconds, float64(l.StreamedTrunkBytes)/1e9,
			float64(l.CompressedTrunkBytes)/1e9, l.CompressedLimitSeconds, l.CompressedProjectedSecs, fewer, pays)
	}
	fmt.Fprintln(w, "(S/TOKEN: compute + I/O; IF OVERL.: max of them; AT EFF.: that over the measured efficiency. I/O per preset from the doctor's cost")
	fmt.Fprintln(w, "model at the disk speed measured here; compute from the resident layers; BF16C: the streamed trunk (and ultra's lm_head) compressed,")
	fmt.Fprintln(w, "its mat-vecs at the BF16C speed measured above; pinned layers stay bf16. BYTES: streamed trunk bytes per token, bf16 over BF16C.")
	fmt.Fprintln(w, "PAYS AT: the slowest BF16C mat-vec, in logical GB/s, at which BF16C's IF OVERL. is no worse than bf16's: above the bf16 speed")
	fmt.Fprintln(w, "means compute-bound, where fewer bytes cannot help.)")
}

func presetByName(ls []bench.PresetLine, name string) (bench.PresetLine, bool) {
	for _, l := range ls {
		if l.Preset == name {
			return l, true
		}
	}
	return bench.PresetLine{}, false
}

func floats(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.2f", x)
	}
	return s
}
