package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"k3/doctor/bench"
	"k3/storage/units"
	"k3/ui/bridge"
)

func init() {
	benchCommands.add("prefill", "reading a prompt at the real K3 width at chunk 64 and in one pass; projected time to first token per preset", benchPrefill)
}

// benchPrefillSpec is the checkpoint k3 bench prefill measures (k3 bench
// layer's; tests use a small one).
var benchPrefillSpec = benchLayerSpec

func benchPrefill(args []string, stdout, stderr io.Writer) int {
	b := newBenchFlags("prefill", stderr, "the report as one JSON object", threadsUsage, "where the real-width checkpoint is generated (reused with k3 bench layer; ~10 GB + trunk)")
	positions := b.Int("positions", 256, "prompt positions measured, at chunk 64 and in one pass (at least 65)")
	memGB := b.Float64("memory-gb", 0, "memory each preset's projection plans its chunk for (0: the smallest usual machine its plan fits)")
	disk := b.Float64("disk-gbps", 0, "disk speed of the projection in GB/s (0: measured here)")
	setUsage(b.FlagSet, stderr, "usage: k3 bench prefill [--json] [--threads N] [--positions N] [--memory-gb GB] [--disk-gbps R] [--dir PATH]",
		"Generates (once, ~10 GB, shared with k3 bench layer) a 3-layer checkpoint at the real K3 width and reads",
		"a prompt through it streamed cold at the smallest budgets, 64 positions per pass and all in one pass: bytes",
		"read and seconds per prompt position, the output compared bit for bit. Then projects the full model's time to",
		"first token for prompts of 100, 1K, 16K and 37K positions per preset, at chunk 64 and at the chunk the",
		"preset's memory plan holds.")
	if _, code := parseArgs(b.FlagSet, args); code >= 0 {
		return code
	}
	if *positions < 65 || *b.threads < 0 || *memGB < 0 || *disk < 0 {
		b.Usage()
		return ExitUsage
	}
	rep, err := bench.Prefill(context.Background(), bench.PrefillConfig{Dir: *b.dir, Spec: benchPrefillSpec(), Threads: *b.threads,
		Positions: *positions, MemoryGB: *memGB, DiskGBps: *disk, Logf: b.logf(stderr)})
	if err != nil {
		return b.failed(stderr, err)
	}
	if *b.json {
		json.NewEncoder(stdout).Encode(rep)
		return ExitOK
	}
	printPrefillReport(stdout, rep)
	return ExitOK
}

func printPrefillReport(w io.Writer, rep *bench.PrefillReport) {
	fmt.Fprintf(w, "measured: the 3 real-width layers streamed cold (one ring slot, the smallest expert cache, tables streamed); disk %.2f GB/s\n", rep.DiskGBps)
	fmt.Fprintf(w, "%-7s %-9s %6s %12s %10s %11s %10s %10s  %s\n", "CHUNK", "POSITIONS", "PASSES", "MB/POSITION", "S/POSITION", "COMPUTE S/P", "RSS", "PLAN", "OUTPUT")
	for _, r := range rep.Runs {
		same := "identical to chunk 64"
		if !r.IdenticalOutput {
			same = "DIFFERS from chunk 64"
		}
		fmt.Fprintf(w, "%-7d %-9d %6d %12.1f %10.3f %11.3f %10s %10s  %s\n", r.Chunk, r.Positions, r.Passes, r.BytesPerPos/1e6, r.SecondsPerPos, r.ComputePerPos,
			units.Bytes(r.PeakRSSBytes), units.Bytes(r.PlanBytes), same)
	}
	if n := len(rep.Runs); n > 1 && rep.Runs[n-1].BytesPerPos > 0 {
		fmt.Fprintf(w, "bytes per prompt position: %.1fx fewer in one pass than at chunk 64\n", rep.Runs[0].BytesPerPos/rep.Runs[n-1].BytesPerPos)
	}
	fmt.Fprintf(w, "\nprojected full model (compute %.2f s per position, scaled from the measured layers by the weight bytes a position touches):\n", rep.ComputePerPos)
	fmt.Fprintf(w, "%-12s %6s %6s", "PRESET", "MEMORY", "CHUNK")
	for _, l := range bench.PrefillLengths {
		fmt.Fprintf(w, " | %-29s", fmt.Sprintf("%d POSITIONS: 64 -> PLAN", l))
	}
	fmt.Fprintln(w)
	for _, pj := range rep.Projections {
		chunk := "-"
		if len(pj.AtPlan) > 0 && pj.AtPlan[0].Chunk > 0 {
			chunk = fmt.Sprint(pj.AtPlan[len(pj.AtPlan)-1].Chunk)
		}
		fmt.Fprintf(w, "%-12s %4.0f GB %6s", pj.Preset, pj.MemoryGB, chunk)
		for i := range pj.At64 {
			a, b := pj.At64[i], pj.AtPlan[i]
			fmt.Fprintf(w, " | %-29s", fmt.Sprintf("%s %s -> %s %s", passes(a.Passes), ttft(a.Seconds), passes(b.Passes), ttft(b.Seconds)))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "(each cell: passes and time to first token at chunk 64, then at the plan's chunk; the plan's chunk for the longest prompt")
	fmt.Fprintln(w, "shown, shorter prompts read in fewer positions per pass when they are shorter. I/O + compute, no overlap.)")
}

func passes(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%dp", n)
}

func ttft(s float64) string {
	if s <= 0 {
		return "-"
	}
	return bridge.Duration(time.Duration(s * float64(time.Second)))
}
