package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"k3/assets/demo"
	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine"
	"k3/engine/plan"
	"k3/engine/synth"
	"k3/storage/units"
)

// Released model: layer 0 is KDA + dense, 68 KDA + MoE, 24 MLA + MoE.
var releasedLayerCounts = map[string]float64{"kda+dense": 1, "kda+moe": 68, "mla+moe": 24}

// LayerLine is one --json line of `k3 bench layer` but the projections.
type LayerLine struct {
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

// PresetLine is one preset's row: the streamed decode measured with the
// ring its plan allows, and the full model's projection.
type PresetLine struct {
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

// LayerConfig is what `k3 bench layer` measures.
type LayerConfig struct {
	Dir           string     // where the checkpoint is generated (reused)
	Spec          synth.Spec // the checkpoint (measure.LayerSpec: the real width)
	Threads       int        // 0: physical cores
	Tokens        int        // decode steps of the per-layer times
	OverlapTokens int        // decode steps of each overlap measurement
	Rounds        int        // rounds of the overlap and BF16C kernel measurements
	Logf          func(string, ...any)
}

// LayerReport is `k3 bench layer`'s run: its measurements (Result), the
// lines they give and a projection per preset.
type LayerReport struct {
	Result  *measure.LayerResult
	Lines   []LayerLine  // bandwidth, resident, streamed, prefill, kernel, compression
	Presets []PresetLine // one per plan.Presets, in order
	// Compute is the full model's resident compute per token; KernelMatrix
	// names the BF16C kernel's matrix and its shape
	Compute      float64
	KernelMatrix string
	// TrunkRatio is the released trunk's BF16C ratio from TrainedNote's
	// ratios; RAMNote and DiskNote list what each limit is the best of
	TrunkRatio                     float64
	TrainedNote, RAMNote, DiskNote string
}

// Layer generates (once) and measures the benchmark checkpoint
// (measure.Layer: each layer resident and streamed, prefill, a streamed
// decode per preset's ring, BF16C against bf16) and projects the full
// model per preset, with and without the streamed trunk in BF16C. A
// measurement that does not fit this machine's memory is refused with an
// *engine.PlanError before anything is loaded.
func Layer(ctx context.Context, cfg LayerConfig) (*LayerReport, error) {
	logf := cfg.Logf
	model, tr, err := measure.PrepareLayer(ctx, cfg.Dir, cfg.Spec, logf)
	if err != nil {
		return nil, err
	}
	runs, err := measure.TrunkRuns(tr)
	if err != nil {
		return nil, err
	}
	cases, byPreset := overlapCases(runs)
	r, err := measure.Layer(ctx, model, tr, measure.LayerConfig{Threads: cfg.Threads, Tokens: max(cfg.Tokens, 1), Overlap: cases,
		OverlapRounds: cfg.Rounds, OverlapTokens: cfg.OverlapTokens, KernelRounds: cfg.Rounds, Logf: logf, Memory: doctor.ReadMemory})
	if err != nil {
		return nil, err
	}
	comp, trainedNote, err := trunkCompression(model, r)
	if err != nil {
		return nil, err
	}
	rep := &LayerReport{Result: r, TrunkRatio: comp.ratio, TrainedNote: trainedNote}
	rep.RAMNote, rep.DiskNote = layerNotes(r)
	rep.Lines, rep.Compute, rep.KernelMatrix = layerLines(r, comp, rep.RAMNote, rep.DiskNote, trainedNote)
	// per preset: the measured overlap, and the full model's projection
	for _, p := range plan.Presets {
		rep.Presets = append(rep.Presets, projectPreset(p, byPreset[p.Name], r, comp.ratio, rep.Compute))
	}
	return rep, nil
}

// layerLines is the report's measured lines (bandwidths, each layer kind
// resident and streamed, prefill, the kernel, the compression per kind),
// with the full model's resident compute per token they give.
func layerLines(r *measure.LayerResult, comp layerCompression, ramNote, diskNote, trainedNote string) (lines []LayerLine, compute float64, kernelMat string) {
	lines = append(lines, LayerLine{Kind: "bandwidth", Layer: "ram", GBps: r.RAMGBps, Note: ramNote}, LayerLine{Kind: "bandwidth", Layer: "disk", GBps: r.DiskGBps, Note: diskNote})
	for _, t := range r.Resident {
		lines = append(lines, LayerLine{Kind: "resident", Layer: t.Kind, Bytes: t.Bytes, Seconds: t.Seconds, LimitSeconds: t.LimitSeconds, Ratio: t.LimitSeconds / t.Seconds})
		compute += releasedLayerCounts[t.Kind] * t.Seconds
	}
	for _, t := range r.Streamed {
		lines = append(lines, LayerLine{Kind: "streamed", Layer: t.Kind, Bytes: t.Bytes, Seconds: t.Seconds, LimitSeconds: t.LimitSeconds, Ratio: t.LimitSeconds / t.Seconds})
	}
	lines = append(lines, LayerLine{Kind: "prefill", TokensPerS: r.PrefillTokensPerS, Layer: fmt.Sprintf("%d-token chunk, 3 layers", r.PrefillTokens)})
	// lm_head: a bf16 mat-vec of 163840 x 7168 at the resident KDA trunk rate
	for _, t := range r.Resident {
		if t.Kind == "kda+dense" {
			compute += float64(doctor.K3.LMHeadBytes) / (float64(t.Bytes) / t.Seconds)
		}
	}
	k := r.Kernel
	kernelMat = fmt.Sprintf("%s %dx%d", r.KernelName, k.Rows, k.Cols)
	lines = append(lines, LayerLine{Kind: "kernel", Layer: kernelMat, GBps: k.BF16GBps, BF16CGBps: k.BF16CGBps,
		Slowdown: k.Slowdown, Level: k.Level, Note: fmt.Sprintf("mat-vec, %d threads, median of %d rounds", k.Threads, len(k.BF16Runs))})
	for _, c := range comp.kinds {
		lines = append(lines, LayerLine{Kind: "compression", Layer: c.kind, Bytes: c.bytes, Compressed: c.compressed, Ratio: float64(c.bytes) / float64(c.compressed),
			SyntheticRatio: r.KernelRatio, Note: trainedNote})
	}
	return lines, compute, kernelMat
}

// projectPreset is preset p's line: its measured overlap (case pc) and the
// full model's projection from the resident compute per token, with the
// streamed trunk in bf16 and in BF16C (ratio).
func projectPreset(p plan.Preset, pc presetCase, r *measure.LayerResult, ratio, compute float64) PresetLine {
	k := r.Kernel
	o := r.Overlap[pc.index]
	ov := o.Overlap
	n := float64(max(ov.Tokens, 1))
	pred := doctor.Predict(p, doctor.Speeds{TrunkDiskGBps: r.DiskGBps, ExpertDiskGBps: r.DiskGBps, BF16GBps: math.Inf(1), MXFP4GBps: math.Inf(1)})
	io := pred.IOSeconds
	streamed := pred.StreamedTrunkBytesPerToken
	if p.Ultra {
		streamed += doctor.K3.LMHeadBytes
	}
	cstreamed := int64(float64(streamed) / ratio)
	cio := io - float64(streamed-cstreamed)/(r.DiskGBps*1e9)
	// the streamed trunk's mat-vecs run on BF16C: slowdown times their
	// bf16 time at the rate measured here
	ccompute := compute + (k.Slowdown-1)*float64(streamed)/(k.BF16GBps*1e9)
	line := PresetLine{Kind: "projection", Preset: p.Name, RingBytes: pc.plan.RingBytes, RingSlots: pc.plan.RingSlots, StreamedLayers: len(pc.full),
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
	return line
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

// layerNotes lists the bandwidth measurements each limit is the best of.
func layerNotes(r *measure.LayerResult) (ram, disk string) {
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
