package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"time"

	"k3/doctor"
	"k3/doctor/measure"
	"k3/engine"
	"k3/engine/plan"
	"k3/engine/synth"
	"k3/storage/config"
)

// PrefillConfig says what `k3 bench prefill` measures.
type PrefillConfig struct {
	Dir       string     // where the real-width checkpoint is generated (measure.PrepareLayer)
	Spec      synth.Spec // measure.LayerSpec (tests: a small one)
	Threads   int
	Positions int // prompt positions measured (at chunk 64 and in one pass)
	// MemoryGB is the memory each preset's projection plans the chunk
	// for (0: PresetMemory, the smallest usual machine its plan fits).
	MemoryGB float64
	// DiskGBps is the disk speed of the projection (0: measured here).
	DiskGBps float64
	Logf     func(string, ...any)
}

// PrefillRun is one measured prompt read: the benchmark checkpoint
// streamed cold from its packed trunk at the smallest budgets (one ring
// slot, the smallest expert cache, the model tables streamed), so every
// pass reads its trunk and the union of the experts its positions pick.
type PrefillRun struct {
	Chunk           int     `json:"chunk"`
	Passes          int     `json:"passes"`
	Positions       int     `json:"positions"`
	BytesPerPos     float64 `json:"bytes_per_position"`
	SecondsPerPos   float64 `json:"seconds_per_position"`
	ComputePerPos   float64 `json:"compute_seconds_per_position"` // wall less the time the forward waited for reads
	PeakRSSBytes    int64   `json:"rss_bytes"`                    // the largest resident size at a pass's end
	PlanBytes       int64   `json:"plan_bytes"`
	IdenticalOutput bool    `json:"identical_output"` // the same first logits, bit for bit, as the chunk-64 run
}

// PrefillProjection is one preset's projected time to first token of the
// full model at chunk 64 and at its plan's chunk.
type PrefillProjection struct {
	Preset   string                     `json:"preset"`
	MemoryGB float64                    `json:"memory_gb"`
	At64     []doctor.PrefillPrediction `json:"chunk_64"`
	AtPlan   []doctor.PrefillPrediction `json:"plan_chunk"`
}

// PrefillReport is `k3 bench prefill`'s result.
type PrefillReport struct {
	DiskGBps      float64             `json:"disk_gbps"`
	Runs          []PrefillRun        `json:"runs"`
	ComputePerPos float64             `json:"k3_compute_seconds_per_position"` // the full model, scaled from the benchmark's layers
	Projections   []PrefillProjection `json:"projections"`
}

// PrefillLengths are the prompt lengths projected: a new conversation's
// question, a long message, and two agents' first requests.
var PrefillLengths = []int{100, 1000, 16000, 37000}

// usualMemoryGB are the machine sizes PresetMemory picks from.
var usualMemoryGB = []float64{8, 16, 32, 64, 128, 256, 512, 1024}

// PresetMemory is the smallest usual machine size (GB) whose memory holds
// within 95% the preset's plan at chunk 64 for the longest prompt
// projected (PrefillLengths): the KV cache of a 37K-position prompt does
// not fit every machine the preset's 4K-position plan fits.
func PresetMemory(pr plan.Preset) float64 {
	p, err := doctor.K3.PrefillPlan(pr.Budget(), slices.Max(PrefillLengths)+1, 0, 64)
	if err != nil {
		return usualMemoryGB[len(usualMemoryGB)-1]
	}
	need := float64(p.Total)
	for _, gb := range usualMemoryGB {
		if 0.95*gb*plan.GB >= need {
			return gb
		}
	}
	return usualMemoryGB[len(usualMemoryGB)-1]
}

// Prefill measures reading a prompt at the real K3 width at chunk 64 and
// in one pass, and projects the full model's time to first token per
// preset at chunk 64 and at the plan's chunk.
func Prefill(ctx context.Context, cfg PrefillConfig) (*PrefillReport, error) {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	model, tr, err := measure.PrepareLayer(ctx, cfg.Dir, cfg.Spec, logf)
	if err != nil {
		return nil, err
	}
	rep := &PrefillReport{DiskGBps: cfg.DiskGBps}
	if rep.DiskGBps <= 0 {
		if rep.DiskGBps, err = diskGBps(ctx, model); err != nil {
			return nil, err
		}
	}
	n := max(cfg.Positions, 65)
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = (1000 + 37*i) % 512
	}
	var ref []float32
	for _, chunk := range []int{64, n} {
		r, logits, err := prefillRun(ctx, model, tr, cfg.Threads, chunk, prompt)
		if err != nil {
			return nil, err
		}
		if ref == nil {
			ref = logits
		}
		r.IdenticalOutput = sameBits(ref, logits)
		logf("chunk %d: %d passes, %.1f MB and %.3f s per position", r.Chunk, r.Passes, r.BytesPerPos/1e6, r.SecondsPerPos)
		rep.Runs = append(rep.Runs, r)
	}
	// the full model's compute per position: the benchmark's, scaled by
	// the weight bytes a position touches (trunk and top-k experts)
	bench := doctor.ModelOf(mustConfig(cfg.Spec))
	benchActive := float64(bench.TrunkBytes + bench.ExpertBytesPerToken())
	rep.ComputePerPos = rep.Runs[len(rep.Runs)-1].ComputePerPos * float64(doctor.K3.TrunkBytes+doctor.K3.ExpertBytesPerToken()) / benchActive
	// attention at the rate the benchmark's layers computed their weights
	bf16 := benchActive / rep.Runs[len(rep.Runs)-1].ComputePerPos / 1e9
	sp := doctor.Speeds{TrunkDiskGBps: rep.DiskGBps, ExpertDiskGBps: rep.DiskGBps, BF16GBps: bf16, MXFP4GBps: bf16}
	for _, pr := range plan.Presets {
		gb := cfg.MemoryGB
		if gb <= 0 {
			gb = PresetMemory(pr)
		}
		pj := PrefillProjection{Preset: pr.Name, MemoryGB: gb}
		for _, l := range PrefillLengths {
			pj.At64 = append(pj.At64, doctor.PredictPrefill(pr, sp, l, int64(gb*plan.GB), 64, rep.ComputePerPos))
			pj.AtPlan = append(pj.AtPlan, doctor.PredictPrefill(pr, sp, l, int64(gb*plan.GB), 0, rep.ComputePerPos))
		}
		rep.Projections = append(rep.Projections, pj)
	}
	return rep, nil
}

// prefillRun reads prompt with chunk positions per pass, streamed cold.
func prefillRun(ctx context.Context, model, tr string, threads, chunk int, prompt []int) (PrefillRun, []float32, error) {
	debug.FreeOSMemory()
	o := engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1, Ultra: true}, Chunk: chunk,
		Positions: len(prompt) + 1, MaxDraft: -1}
	if mem, err := doctor.ReadMemory(); err == nil {
		o.Memory = &mem
	}
	m, err := engine.Open(model, o)
	if err != nil {
		return PrefillRun{}, nil, err
	}
	defer m.Close()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(m.HeapLimit()))
	e := m.NewEngine(threads)
	defer e.Close()
	// the trunk and the experts are read with O_DIRECT: no page cache to drop
	r := PrefillRun{Chunk: m.Chunk(), Positions: len(prompt), PlanBytes: m.Plan.Total}
	start := e.Snapshot()
	t0 := time.Now()
	res, err := e.Generate(ctx, nil, prompt, engine.GenOptions{MaxTokens: 1, Spec: engine.SpecOff, OnEvent: func(ev engine.Event) {
		if ev.Kind == engine.EventPrefill {
			r.Passes++
			r.PeakRSSBytes = max(r.PeakRSSBytes, ev.Stats.RSSBytes)
		}
	}})
	if err != nil {
		return PrefillRun{}, nil, err
	}
	wall := time.Since(t0).Seconds()
	d := e.Snapshot().Sub(start)
	n := float64(len(prompt))
	r.BytesPerPos = float64(d.BytesRead()) / n
	r.SecondsPerPos = res.PrefillSeconds / n
	r.ComputePerPos = math.Max(wall-d.IOWaitSeconds(), 0) / n
	return r, res.FirstLogits, nil
}

// mustConfig is spec's config as the engine parses it.
func mustConfig(spec synth.Spec) *config.Config {
	raw, err := json.Marshal(spec.Config())
	if err == nil {
		var c *config.Config
		if c, err = config.Parse("benchmark config", raw); err == nil {
			return c
		}
	}
	panic("bench: the benchmark spec's config: " + err.Error())
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// diskGBps is the raw O_DIRECT read speed of the disk holding model.
func diskGBps(ctx context.Context, model string) (float64, error) {
	files, err := measure.ShardPaths(model)
	if err != nil {
		return 0, err
	}
	runs, err := measure.LimitRuns(ctx, files, 2<<30, "before")
	best := 0.0
	for _, r := range runs {
		best = max(best, r.GBps)
	}
	if best <= 0 && err == nil {
		err = fmt.Errorf("no disk speed measured")
	}
	return best, err
}
