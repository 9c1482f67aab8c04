package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"k3/assets/demo"
	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine"
	"k3/engine/plan"
	"k3/storage/units"
)

func init() {
	benchCommands.add("layer", "per-layer decode time at the real K3 width, resident and streamed; overlap and projected s/token per preset, with and without BF16C", benchLayer)
}

// Released model: layer 0 is KDA + dense, 68 KDA + MoE, 24 MLA + MoE.
var releasedLayerCounts = map[string]float64{"kda+dense": 1, "kda+moe": 68, "mla+moe": 24}

// benchLayerSpec is the checkpoint k3 bench layer generates (tests use a
// small one).
var benchLayerSpec = measure.LayerSpec

type layerBenchLine struct {
	Kind         string  `json:"kind"` // resident, streamed, prefill, bandwidth, kernel, compression (projection: presetLine)
	Layer        string  `json:"layer,omitempty"`
	Bytes        int64   `json:"bytes,omitempty"`
	Seconds      float64 `json:"seconds,omitempty"`
	LimitSeconds float64 `json:"limit_seconds,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
	TokensPerS   float64 `json:"tokens_per_s,omitempty"`
	GBps         float64 `json:"gbps,omitempty"`
	Note         string  `json:"note,omitempty"`
	// kernel: BF16C against bf16 in the same run
	BF16CGBps float64 `json:"bf16c_gbps,omitempty"`
	Slowdown  float64 `json:"slowdown,omitempty"`
	Level     string  `json:"level,omitempty"`
	// compression: per layer kind, the trunk as BF16C would store it with
	// the trained demo model's ratio per tensor kind (Ratio: bytes over
	// it), and SyntheticRatio what the layer's own (uniform random)
	// weights give on one of its matrices
	Compressed     int64   `json:"compressed_bytes,omitempty"`
	SyntheticRatio float64 `json:"synthetic_ratio,omitempty"`
}

// presetLine is one preset's row: the streamed decode measured with the
// ring its plan allows, and the full model's projection.
type presetLine struct {
	Kind   string `json:"kind"` // projection
	Preset string `json:"preset"`
	// the released model's plan at the preset: ring, layers it streams and
	// of those, how many have the next one read while they compute
	RingBytes      int64 `json:"ring_bytes"`
	RingSlots      int   `json:"ring_slots"`
	StreamedLayers int   `json:"streamed_layers"`
	InFlight       int   `json:"in_flight"`
	// the measured run (the benchmark checkpoint; the same for presets of
	// the same Case): per token, wall (MeasuredSeconds), time some read
	// was in flight (ReadSeconds), time the forward did not wait for a
	// read (ComputeSeconds); OverlapEfficiency = max(read, compute) /
	// measured, 1 being perfect overlap
	Case                string    `json:"case"`
	BenchRingBytes      int64     `json:"bench_ring_bytes"`
	BenchRingSlots      int       `json:"bench_ring_slots"`
	BenchStreamedLayers int       `json:"bench_streamed_layers"`
	BenchInFlight       int       `json:"bench_in_flight"`
	MeasuredSeconds     float64   `json:"measured_seconds"`
	ReadSeconds         float64   `json:"read_seconds"`
	ComputeSeconds      float64   `json:"compute_seconds"`
	OverlapEfficiency   float64   `json:"overlap_efficiency"`
	EfficiencyRuns      []float64 `json:"efficiency_runs"`
	// the full model per token: Seconds = compute + I/O (no overlap),
	// LimitSeconds = max of them, ProjectedSeconds = the limit at the
	// measured efficiency; the Compressed ones with the streamed trunk in
	// BF16C (pinned layers stay bf16)
	Seconds                  float64 `json:"seconds"`
	LimitSeconds             float64 `json:"limit_seconds"`
	ProjectedSeconds         float64 `json:"projected_seconds"`
	StreamedTrunkBytes       int64   `json:"streamed_trunk_bytes"`
	CompressedTrunkBytes     int64   `json:"compressed_trunk_bytes"`
	CompressedLimitSeconds   float64 `json:"compressed_limit_seconds"`
	CompressedProjectedSecs  float64 `json:"compressed_projected_seconds"`
	CompressedComputeSeconds float64 `json:"compressed_compute_seconds"`
	ComputeFullSeconds       float64 `json:"full_compute_seconds"`
	IOFullSeconds            float64 `json:"full_io_seconds"`
	CompressedIOFullSeconds  float64 `json:"compressed_full_io_seconds"`
	// BreakEvenGBps is the slowest BF16C mat-vec (logical GB/s) at which
	// the compressed limit is no worse than the bf16 one (0: nothing
	// streams, compression changes nothing)
	BreakEvenGBps float64 `json:"bf16c_break_even_gbps,omitempty"`
	Note          string  `json:"note,omitempty"`
}

// presetCase is how a preset's streamed decode is measured on the
// benchmark checkpoint.
type presetCase struct {
	plan  *plan.Plan
	full  []int64 // the released model's streamed layers, in order
	index int     // into the cases
	note  string
}

// overlapCases maps each preset to a decode of the benchmark checkpoint
// (layer runs runs): a preset whose plan pins the whole trunk decodes it
// resident; one that streams decodes every benchmark layer from the packed
// trunk through the preset's ring, with as many layers in flight, or, when
// that ring cannot hold them at every benchmark layer (the benchmark's
// dense layer is a third of it, K3's one of 93), through the smallest ring
// that can. The expert cache is the minimum: all 16 experts of a token are
// read, as K3's expert cache hits about none of them below ~24 GB.
func overlapCases(runs []int64) ([]measure.OverlapCase, map[string]presetCase) {
	var cases []measure.OverlapCase
	byPreset := map[string]presetCase{}
	find := func(c measure.OverlapCase) int {
		for i, x := range cases {
			if x.Streamed == c.Streamed && x.Budget == c.Budget {
				return i
			}
		}
		cases = append(cases, c)
		return len(cases) - 1
	}
	for _, p := range plan.Presets {
		pl := doctor.K3.Plan(p.Budget())
		pc := presetCase{plan: pl}
		for i, pinned := range pl.Pinned {
			if !pinned {
				pc.full = append(pc.full, doctor.K3.LayerBytes[i])
			}
		}
		if pl.RingSlots == 0 {
			pc.index = find(measure.OverlapCase{Name: "trunk resident", Budget: engine.Budget{CacheBytes: 1}})
			pc.note = "the whole trunk is pinned: only experts are read"
		} else {
			slots := pl.RingSlots
			ring := pl.RingBytes
			var total int64
			for _, b := range runs {
				total += b
			}
			// the preset's ring, unless it misses a benchmark layer's
			// successor or holds them all (then nothing would stream)
			own := measure.InFlight(runs, ring, slots)
			if own < len(runs) || ring >= total {
				ring = measure.MinRing(runs, slots)
			}
			name := fmt.Sprintf("ring %s x%d", units.Bytes(ring), slots)
			if p.Ultra {
				name += ", tables streamed"
			}
			pc.index = find(measure.OverlapCase{Name: name, Streamed: true, Budget: engine.Budget{TrunkBytes: ring, Ring: slots, CacheBytes: 1, Ultra: p.Ultra}})
			var notes []string
			if in := measure.InFlight(pc.full, pl.RingBytes, slots); in < len(pc.full) {
				notes = append(notes, fmt.Sprintf("K3's %s ring holds %d layers in flight at %d of its %d streamed layers; at the other %d a read waits for the layer before it (not measured here)",
					units.Bytes(pl.RingBytes), slots, in, len(pc.full), len(pc.full)-in))
			}
			switch {
			case ring == pl.RingBytes:
			case pl.RingBytes >= total:
				notes = append(notes, fmt.Sprintf("measured with a %s ring: the preset's %s would hold the whole benchmark trunk", units.Bytes(ring), units.Bytes(pl.RingBytes)))
			default:
				notes = append(notes, fmt.Sprintf("measured with a %s ring: the preset's %s holds %d benchmark layers at only %d of its %d",
					units.Bytes(ring), units.Bytes(pl.RingBytes), slots, own, len(runs)))
			}
			pc.note = strings.Join(notes, "; ")
		}
		byPreset[p.Name] = pc
	}
	return cases, byPreset
}

func benchLayer(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("k3 bench layer", stderr)
	jsonOut := fs.Bool("json", false, "one JSON object per line")
	cache, _ := os.UserCacheDir()
	dir := fs.String("dir", filepath.Join(cache, "k3", "bench"), "where the real-width checkpoint is generated (reused; ~10 GB + trunk)")
	threads := fs.Int("threads", 0, "threads (0: physical cores)")
	tokens := fs.Int("tokens", 8, "decode steps measured (the per-layer times are their mean)")
	ovTokens := fs.Int("overlap-tokens", 4, "decode steps of each overlap measurement")
	rounds := fs.Int("rounds", 3, "rounds of the overlap and BF16C kernel measurements (the median is reported)")
	setUsage(fs, stderr, "usage: k3 bench layer [--json] [--threads N] [--tokens N] [--overlap-tokens N] [--rounds N] [--dir PATH]",
		"Generates (once, ~10 GB) a 3-layer checkpoint at the real K3 width, then measures each layer's",
		"decode time resident and streamed from disk against this machine's RAM and disk speed,",
		"prefill, a streamed decode per preset with the ring the preset's plan allows (measured s/token",
		"next to max(read, compute) of the same run: the overlap efficiency), BF16C's mat-vec speed",
		"against bf16, and the projected seconds per token of the full model at each preset, with and",
		"without the streamed trunk in BF16C.")
	if _, code := parseArgs(fs, args); code >= 0 {
		return code
	}
	if *ovTokens < 1 || *rounds < 1 || *threads < 0 {
		fs.Usage()
		return ExitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "k3 bench layer: %v\n", err)
		return ExitRuntime
	}
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	ctx := context.Background()
	model, tr, err := measure.PrepareLayer(ctx, *dir, benchLayerSpec(), logf)
	if err != nil {
		return fail(err)
	}
	runs, err := measure.TrunkRuns(tr)
	if err != nil {
		return fail(err)
	}
	cases, byPreset := overlapCases(runs)
	r, err := measure.Layer(ctx, model, tr, measure.LayerConfig{Threads: *threads, Tokens: max(*tokens, 1), Overlap: cases,
		OverlapRounds: *rounds, OverlapTokens: *ovTokens, KernelRounds: *rounds, Logf: logf, Memory: doctor.ReadMemory})
	var pe *engine.PlanError
	if errors.As(err, &pe) {
		fmt.Fprintf(stderr, "k3 bench layer: refused before loading anything: a measurement does not fit this machine: %v\n", err)
		return ExitRuntime
	}
	if err != nil {
		return fail(err)
	}
	comp, trainedNote, err := trunkCompression(model, r)
	if err != nil {
		return fail(err)
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
	k := r.Kernel
	kernelMat := fmt.Sprintf("%s %dx%d", r.KernelName, k.Rows, k.Cols)
	lines = append(lines, layerBenchLine{Kind: "kernel", Layer: kernelMat, GBps: k.BF16GBps, BF16CGBps: k.BF16CGBps,
		Slowdown: k.Slowdown, Level: k.Level, Note: fmt.Sprintf("mat-vec, %d threads, median of %d rounds", k.Threads, len(k.BF16Runs))})
	for _, c := range comp.kinds {
		lines = append(lines, layerBenchLine{Kind: "compression", Layer: c.kind, Bytes: c.bytes, Compressed: c.compressed, Ratio: float64(c.bytes) / float64(c.compressed),
			SyntheticRatio: r.KernelRatio, Note: trainedNote})
	}

	// per preset: the measured overlap, and the full model's projection
	var presets []presetLine
	for _, p := range plan.Presets {
		pc := byPreset[p.Name]
		o := r.Overlap[pc.index]
		ov := o.Overlap
		n := float64(max(ov.Tokens, 1))
		pred := doctor.Predict(p, doctor.Speeds{TrunkDiskGBps: r.DiskGBps, ExpertDiskGBps: r.DiskGBps, BF16GBps: math.Inf(1), MXFP4GBps: math.Inf(1)})
		io := pred.IOSeconds
		streamed := pred.StreamedTrunkBytesPerToken
		if p.Ultra {
			streamed += doctor.K3.LMHeadBytes
		}
		cstreamed := int64(float64(streamed) / comp.ratio)
		cio := io - float64(streamed-cstreamed)/(r.DiskGBps*1e9)
		// the streamed trunk's mat-vecs run on BF16C: slowdown times their
		// bf16 time at the rate measured here
		ccompute := compute + (k.Slowdown-1)*float64(streamed)/(k.BF16GBps*1e9)
		line := presetLine{Kind: "projection", Preset: p.Name, RingBytes: pc.plan.RingBytes, RingSlots: pc.plan.RingSlots, StreamedLayers: len(pc.full),
			Case: o.Case.Name, BenchRingBytes: o.RingBytes, BenchRingSlots: o.RingSlots, BenchStreamedLayers: o.StreamedLayers, BenchInFlight: o.InFlight,
			MeasuredSeconds: ov.WallSeconds / n, ReadSeconds: ov.ReadSeconds / n, ComputeSeconds: ov.ComputeSeconds / n, OverlapEfficiency: ov.Efficiency,
			Seconds: compute + io, LimitSeconds: math.Max(compute, io), StreamedTrunkBytes: streamed, CompressedTrunkBytes: cstreamed,
			CompressedLimitSeconds: math.Max(ccompute, cio), CompressedComputeSeconds: ccompute, ComputeFullSeconds: compute, IOFullSeconds: io,
			CompressedIOFullSeconds: cio, Note: pc.note}
		if len(pc.full) > 0 {
			line.InFlight = measure.InFlight(pc.full, pc.plan.RingBytes, pc.plan.RingSlots)
		}
		if streamed > 0 {
			// compute + S(1/c - 1/b) <= max(compute, io): c >= 1 / (1/b + (limit - compute)/S)
			line.BreakEvenGBps = 1 / (1/k.BF16GBps + (line.LimitSeconds-compute)*1e9/float64(streamed))
		}
		for _, run := range o.Runs {
			line.EfficiencyRuns = append(line.EfficiencyRuns, run.Efficiency)
		}
		if ov.Efficiency > 0 {
			line.ProjectedSeconds = line.LimitSeconds / ov.Efficiency
			line.CompressedProjectedSecs = line.CompressedLimitSeconds / ov.Efficiency
		}
		presets = append(presets, line)
	}

	if *jsonOut {
		enc := json.NewEncoder(stdout)
		for _, l := range lines {
			enc.Encode(l)
		}
		for _, l := range presets {
			enc.Encode(l)
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

	fmt.Fprintf(stdout, "\nstreamed decode per preset (the 3 benchmark layers, the smallest expert cache; %d tokens a run, the run of median efficiency of %d):\n", *ovTokens, *rounds)
	fmt.Fprintf(stdout, "%-12s %-18s %-33s %-6s %8s %7s %8s %7s %6s  %s\n", "PRESET", "K3 RING, IN FLIGHT", "MEASURED WITH", "IN FL.", "S/TOKEN", "READ S", "COMPUTE", "MAX S", "EFF.", "EFF. RUNS")
	for _, l := range presets {
		k3ring := "none (all pinned)"
		if l.RingSlots > 0 {
			k3ring = fmt.Sprintf("%s x%d, %d/%d", units.Bytes(l.RingBytes), l.RingSlots, l.InFlight, l.StreamedLayers)
		}
		inFl := "-"
		if l.BenchStreamedLayers > 0 {
			inFl = fmt.Sprintf("%d/%d", l.BenchInFlight, l.BenchStreamedLayers)
		}
		fmt.Fprintf(stdout, "%-12s %-18s %-33s %-6s %8.2f %7.2f %8.2f %7.2f %6.2f  %s\n", l.Preset, k3ring, l.Case, inFl, l.MeasuredSeconds, l.ReadSeconds, l.ComputeSeconds,
			math.Max(l.ReadSeconds, l.ComputeSeconds), l.OverlapEfficiency, floats(l.EfficiencyRuns))
	}
	fmt.Fprintln(stdout, "(IN FLIGHT: streamed layers whose successor is read while they compute. READ S: time some read was in flight; COMPUTE: time the")
	fmt.Fprintln(stdout, "forward did not wait for one; EFF. = max(READ, COMPUTE) / S/TOKEN, 1 = perfect overlap; the target is >= 1/1.15 = 0.87.)")
	for _, l := range presets {
		if l.Note != "" {
			fmt.Fprintf(stdout, "  %s: %s\n", l.Preset, l.Note)
		}
	}
	if l, ok := presetByName(presets, "laptop"); ok && l.RingSlots > 1 {
		fmt.Fprintf(stdout, "  at the 8 GB floor (laptop) K3's plan reads the next layer while one computes at %d of its %d streamed layers.\n", l.InFlight, l.StreamedLayers)
	}

	fmt.Fprintf(stdout, "\nBF16C: mat-vec of %s at level %s, %d threads: bf16 %.2f GB/s, bf16c %.2f GB/s of logical weights (%.2fx the time; median of %d)\n",
		kernelMat, k.Level, k.Threads, k.BF16GBps, k.BF16CGBps, k.Slowdown, len(k.BF16Runs))
	fmt.Fprintf(stdout, "the released trunk in BF16C, at %s: %.3fx fewer bytes (that matrix's own synthetic weights: %.3fx)\n", trainedNote, comp.ratio, r.KernelRatio)

	fmt.Fprintf(stdout, "\nprojected full model (1 dense + 68 KDA + 24 MLA layers, lm_head), compute %.1f s/token resident:\n", compute)
	fmt.Fprintf(stdout, "%-12s %9s %9s %9s %10s | %8s %9s %9s %7s %10s\n", "PRESET", "S/TOKEN", "IF OVERL.", "AT EFF.", "TRUNK GB", "BF16C GB", "IF OVERL.", "AT EFF.", "BYTES", "PAYS AT")
	for _, l := range presets {
		fewer, pays := "-", "-"
		if l.CompressedTrunkBytes > 0 {
			fewer = fmt.Sprintf("%.2fx", float64(l.StreamedTrunkBytes)/float64(l.CompressedTrunkBytes))
			pays = fmt.Sprintf("%.1f GB/s", l.BreakEvenGBps)
		}
		fmt.Fprintf(stdout, "%-12s %9.1f %9.1f %9.1f %10.1f | %8.1f %9.1f %9.1f %7s %10s\n", l.Preset, l.Seconds, l.LimitSeconds, l.ProjectedSeconds, float64(l.StreamedTrunkBytes)/1e9,
			float64(l.CompressedTrunkBytes)/1e9, l.CompressedLimitSeconds, l.CompressedProjectedSecs, fewer, pays)
	}
	fmt.Fprintln(stdout, "(S/TOKEN: compute + I/O; IF OVERL.: max of them; AT EFF.: that over the measured efficiency. I/O per preset from the doctor's cost")
	fmt.Fprintln(stdout, "model at the disk speed measured here; compute from the resident layers; BF16C: the streamed trunk (and ultra's lm_head) compressed,")
	fmt.Fprintln(stdout, "its mat-vecs at the BF16C speed measured above; pinned layers stay bf16. BYTES: streamed trunk bytes per token, bf16 over BF16C.")
	fmt.Fprintln(stdout, "PAYS AT: the slowest BF16C mat-vec, in logical GB/s, at which BF16C's IF OVERL. is no worse than bf16's: above the bf16 speed")
	fmt.Fprintln(stdout, "means compute-bound, where fewer bytes cannot help.)")
	return ExitOK
}

func presetByName(ls []presetLine, name string) (presetLine, bool) {
	for _, l := range ls {
		if l.Preset == name {
			return l, true
		}
	}
	return presetLine{}, false
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

// kindCompression is one benchmark layer kind's trunk, bf16 and BF16C.
type kindCompression struct {
	kind              string
	bytes, compressed int64
}

// layerCompression is the released trunk's BF16C ratio and the layer
// kinds it comes from.
type layerCompression struct {
	ratio float64 // the released layer mix: bf16 bytes over BF16C bytes
	kinds []kindCompression
}

// trunkCompression projects the benchmark layers (real K3 width and
// tensors) into BF16C at the ratio per tensor kind that the trained demo
// model's weights give (BF16C block ratio, no row offsets: the rows here
// are K3's), and the released trunk's ratio from the layer mix.
func trunkCompression(model string, r *measure.LayerResult) (layerCompression, string, error) {
	tmp, err := os.MkdirTemp("", "k3-bench-demo-")
	if err != nil {
		return layerCompression{}, "", err
	}
	defer os.RemoveAll(tmp)
	if err := demo.Write(tmp); err != nil {
		return layerCompression{}, "", err
	}
	ms, err := measure.CheckpointMatrices(tmp, "demo")
	if err != nil {
		return layerCompression{}, "", err
	}
	ratios := map[string]float64{}
	var all float64
	for _, row := range measure.CompressStats(ms) {
		if row.Kind == "all" {
			all = row.BlockRatio
		} else {
			ratios[row.Kind] = row.BlockRatio
		}
	}
	proj, err := measure.ProjectTrunk(model, ratios, all)
	if err != nil {
		return layerCompression{}, "", err
	}
	var c layerCompression
	var b, z float64
	for i, l := range proj {
		if i >= len(r.Resident) {
			break
		}
		kind := r.Resident[i].Kind
		c.kinds = append(c.kinds, kindCompression{kind, l.Bytes, l.Compressed})
		b += releasedLayerCounts[kind] * float64(l.Bytes)
		z += releasedLayerCounts[kind] * float64(l.Compressed)
	}
	c.ratio = b / z
	return c, "the trained demo model's BF16C ratio per tensor kind", nil
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
