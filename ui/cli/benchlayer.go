package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine/plan"
)

func init() {
	benchCommands.add("layer", "per-layer decode time at the real K3 width, resident and streamed; projected s/token per preset", benchLayer)
}

// Released model: layer 0 is KDA + dense, 68 KDA + MoE, 24 MLA + MoE.
var releasedLayerCounts = map[string]float64{"kda+dense": 1, "kda+moe": 68, "mla+moe": 24}

type layerBenchLine struct {
	Kind         string  `json:"kind"` // resident, streamed, prefill, projection, bandwidth
	Layer        string  `json:"layer,omitempty"`
	Bytes        int64   `json:"bytes,omitempty"`
	Seconds      float64 `json:"seconds,omitempty"`
	LimitSeconds float64 `json:"limit_seconds,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
	Preset       string  `json:"preset,omitempty"`
	TokensPerS   float64 `json:"tokens_per_s,omitempty"`
	GBps         float64 `json:"gbps,omitempty"`
	Note         string  `json:"note,omitempty"`
}

func benchLayer(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("k3 bench layer", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line")
	cache, _ := os.UserCacheDir()
	dir := fs.String("dir", filepath.Join(cache, "k3", "bench"), "where the real-width checkpoint is generated (reused; ~10 GB + trunk)")
	threads := fs.Int("threads", 0, "threads (0: physical cores)")
	tokens := fs.Int("tokens", 8, "decode steps measured (the per-layer times are their mean)")
	setUsage(fs, stderr, "usage: k3 bench layer [--json] [--threads N] [--tokens N] [--dir PATH]",
		"Generates (once, ~10 GB) a 3-layer checkpoint at the real K3 width, then measures each layer's",
		"decode time resident and streamed from disk against this machine's RAM and disk speed,",
		"prefill, and the projected seconds per token of the full model at each preset.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	model, tr, err := measure.PrepareLayer(context.Background(), *dir, measure.LayerSpec(), logf)
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench layer: %v\n", err)
		return ExitRuntime
	}
	r, err := measure.Layer(context.Background(), model, tr, *threads, max(*tokens, 1), logf)
	if err != nil {
		fmt.Fprintf(stderr, "k3 bench layer: %v\n", err)
		return ExitRuntime
	}
	var lines []layerBenchLine
	ramNote, diskNote := layerBenchNotes(r)
	lines = append(lines, layerBenchLine{Kind: "bandwidth", Layer: "ram", GBps: r.RAMGBps, Note: ramNote}, layerBenchLine{Kind: "bandwidth", Layer: "disk", GBps: r.DiskGBps, Note: diskNote})
	compute := 0.0
	for _, t := range r.Resident {
		lines = append(lines, layerBenchLine{Kind: "resident", Layer: t.Kind, Bytes: t.Bytes, Seconds: t.Seconds, LimitSeconds: t.LimitSeconds, Ratio: t.LimitSeconds / t.Seconds})
		compute += releasedLayerCounts[t.Kind] * t.Seconds
	}
	for _, t := range r.Streamed {
		lines = append(lines, layerBenchLine{Kind: "streamed", Layer: t.Kind, Bytes: t.Bytes, Seconds: t.Seconds, LimitSeconds: t.LimitSeconds, Ratio: t.LimitSeconds / t.Seconds})
	}
	lines = append(lines, layerBenchLine{Kind: "prefill", TokensPerS: r.PrefillTokensPerS, Layer: fmt.Sprintf("%d-token chunk, 3 layers", r.PrefillTokens)})
	// lm_head: a bf16 mat-vec of 163840 x 7168 at the resident KDA trunk rate
	for _, t := range r.Resident {
		if t.Kind == "kda+dense" {
			compute += float64(doctor.K3.LMHeadBytes) / (float64(t.Bytes) / t.Seconds)
		}
	}
	inf := math.Inf(1)
	for _, p := range plan.Presets {
		io := doctor.Predict(p, doctor.Speeds{TrunkDiskGBps: r.DiskGBps, ExpertDiskGBps: r.DiskGBps, BF16GBps: inf, MXFP4GBps: inf}).IOSeconds
		lines = append(lines, layerBenchLine{Kind: "projection", Preset: p.Name, Seconds: compute + io, LimitSeconds: math.Max(compute, io)})
	}
	if *jsonOut {
		for _, l := range lines {
			b, _ := json.Marshal(l)
			fmt.Fprintln(stdout, string(b))
		}
		return ExitOK
	}
	fmt.Fprintf(stdout, "RAM read %.1f GB/s (%d threads; %s)\ndisk O_DIRECT read %.2f GB/s (%s)\n\n", r.RAMGBps, r.Threads, ramNote, r.DiskGBps, diskNote)
	fmt.Fprintf(stdout, "%-9s %-10s %10s %10s %10s %7s\n", "MODE", "LAYER", "MB/TOKEN", "S/TOKEN", "LIMIT S", "RATIO")
	for _, l := range lines {
		if l.Kind == "resident" || l.Kind == "streamed" {
			fmt.Fprintf(stdout, "%-9s %-10s %10.1f %10.3f %10.3f %7.2f\n", l.Kind, l.Layer, float64(l.Bytes)/1e6, l.Seconds, l.LimitSeconds, l.Ratio)
		}
	}
	fmt.Fprintf(stdout, "(streamed: caches dropped, %d trunk ring slot(s), so no read-ahead; the smallest expert cache)\n", r.StreamRingSlots)
	fmt.Fprintf(stdout, "\nprefill: %.1f tokens/s (%d-token chunk through the 3 layers)\n", r.PrefillTokensPerS, r.PrefillTokens)
	fmt.Fprintf(stdout, "\nprojected full model (1 dense + 68 KDA + 24 MLA layers, lm_head), compute %.1f s/token resident:\n", compute)
	fmt.Fprintf(stdout, "%-12s %12s %14s\n", "PRESET", "S/TOKEN", "IF OVERLAPPED")
	for _, l := range lines {
		if l.Kind == "projection" {
			fmt.Fprintf(stdout, "%-12s %12.1f %14.1f\n", l.Preset, l.Seconds, l.LimitSeconds)
		}
	}
	fmt.Fprintln(stdout, "(I/O per preset from the doctor's cost model at the disk speed measured here; compute from the resident layers.)")
	return ExitOK
}

// layerBenchNotes lists the bandwidth measurements each limit is the best of.
func layerBenchNotes(r *measure.LayerResult) (ram, disk string) {
	ram = "best of"
	for i, g := range r.RAMRuns {
		if i > 0 {
			ram += ","
		}
		ram += fmt.Sprintf(" %.1f", g)
	}
	ram += " before and after the resident runs"
	disk = "best of"
	for i, d := range r.DiskRuns {
		if i > 0 {
			disk += ","
		}
		disk += fmt.Sprintf(" %.2f (%s)", d.GBps, d)
	}
	return ram, disk
}
