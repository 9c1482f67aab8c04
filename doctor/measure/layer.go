package measure

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k3/engine"
	"k3/engine/synth"
	"k3/kernels"
	"k3/storage/trunk"
)

// LayerSpec is a checkpoint at the real Kimi K3 width: hidden 7168, 96
// KDA heads of 128, MLA with the released ranks, latent 3584, expert width
// 3072, vocab 163840; layer 0 is KDA + the dense MLP, layer 1 KDA + MoE,
// layer 2 MLA + MoE. It has 64 experts per MoE layer instead of 896: a token
// reads the same 16 x 17.5 MB per layer. About 10.5 GB on disk.
func LayerSpec() synth.Spec {
	return synth.Spec{Vocab: 163840, Hidden: 7168, Layers: 3, KDAHeads: 96, KDAHeadDim: 128, ConvK: 4,
		Heads: 96, QLora: 1536, KVLora: 512, Nope: 128, Rope: 64, VHead: 128, Inter: 33792, FirstDense: 1,
		Experts: 64, TopK: 16, Shared: 2, MoEInter: 3072, Latent: 3584, Block: 12, FullAttn: []int{3}, Seed: 13}
}

// The RAM bandwidth measurement: a buffer well above L3, read for a while
// (tests shrink both).
var (
	layerRAMBytes  = 1 << 30
	layerRAMTime   = 2 * time.Second
	layerDiskBytes = int64(2 << 30) // per disk measurement
)

// LayerTiming is one layer's decode cost.
type LayerTiming struct {
	Layer        int
	Kind         string  // "kda+dense", "kda+moe", "mla+moe"
	Bytes        int64   // weight bytes one token touches: trunk + top-k experts
	Seconds      float64 // per token
	LimitSeconds float64 // Bytes / measured bandwidth
}

// LayerResult is what `k3 bench layer` measures in one run.
type LayerResult struct {
	RAMGBps           float64 // streaming read bandwidth, all threads (the better of before and after the resident runs)
	DiskGBps          float64 // raw O_DIRECT read of the checkpoint's disk (the best of DiskRuns)
	RAMRuns           []float64
	DiskRuns          []DiskRun
	StreamRingSlots   int // trunk ring slots of the streamed runs (1: no read-ahead)
	Resident          []LayerTiming
	Streamed          []LayerTiming
	PrefillTokensPerS float64
	PrefillTokens     int
	Threads           int
}

// PrepareLayer generates (once, reused) the real-width checkpoint and
// its packed trunk under dir.
func PrepareLayer(ctx context.Context, dir string, spec synth.Spec, logf func(string, ...any)) (model, tr string, err error) {
	return prepare(ctx, filepath.Join(dir, "layer"), spec, logf)
}

func layerKind(m *engine.Model, i int) string {
	a := "kda"
	if m.Cfg.IsMLA(i) {
		a = "mla"
	}
	if m.Cfg.IsDense(i) {
		return a + "+dense"
	}
	return a + "+moe"
}

// Layer measures per-layer decode time with everything resident and
// with the trunk and experts streamed cold from disk, and prefill speed.
func Layer(ctx context.Context, model, tr string, threads, tokens int, logf func(string, ...any)) (*LayerResult, error) {
	res := &LayerResult{}
	// the RAM and disk limits are measured before and after the runs they
	// bound, and the better kept: on a shared machine both drift
	ram := func() error {
		pool := kernels.NewPool(threads)
		defer pool.Close()
		res.Threads = pool.Threads()
		bw, err := RAM(pool, layerRAMBytes, layerRAMTime)
		if err != nil {
			return err
		}
		res.RAMRuns = append(res.RAMRuns, bw)
		res.RAMGBps = max(res.RAMGBps, bw)
		logf("RAM read bandwidth: %.1f GB/s (%d threads)", bw, res.Threads)
		return nil
	}
	if err := ram(); err != nil {
		return nil, err
	}

	files, err := shardPaths(model)
	if err != nil {
		return nil, err
	}
	disk := func(when string) error {
		runs, err := LimitRuns(ctx, files, layerDiskBytes, when)
		for _, r := range runs {
			res.DiskRuns = append(res.DiskRuns, r)
			res.DiskGBps = max(res.DiskGBps, r.GBps)
			logf("raw O_DIRECT read, %s: %.2f GB/s", r, r.GBps)
		}
		return err
	}
	if err := disk("before"); err != nil {
		return nil, err
	}

	prompt := make([]int, 64)
	for i := range prompt {
		prompt[i] = (1000 + 37*i) % 512 // inside any vocabulary the benchmark generates
	}
	run := func(opt engine.Options, cold bool) ([]LayerTiming, float64, error) {
		opt.Positions, opt.Chunk = len(prompt)+tokens+1, 64
		m, err := engine.Open(model, opt)
		if err != nil {
			return nil, 0, err
		}
		defer m.Close()
		p := m.Plan
		if opt.TrunkDir != "" {
			res.StreamRingSlots = p.RingSlots
			if p.PinnedBytes > 0 || p.RingSlots != 1 {
				return nil, 0, fmt.Errorf("the streamed run should stream every layer through one ring slot; the plan pins %d bytes and has %d slots", p.PinnedBytes, p.RingSlots)
			}
		}
		e := m.NewEngine(threads)
		defer e.Close()
		// prefill twice: the first run reads the experts, the second is timed
		if _, err := e.Feed(ctx, m.NewState(), prompt, false); err != nil {
			return nil, 0, err
		}
		st := m.NewState()
		t0 := time.Now()
		logits, err := e.Feed(ctx, st, prompt, false)
		if err != nil {
			return nil, 0, err
		}
		prefill := float64(len(prompt)) / time.Since(t0).Seconds()
		if cold {
			dropPaths(append(files, filepath.Join(tr, trunk.BinFile)))
		}
		e.LayerSeconds = make([]float64, m.Bound)
		id := kernels.Argmax(logits)
		for i := 0; i < tokens; i++ {
			if logits, err = e.Feed(ctx, st, []int{id}, false); err != nil {
				return nil, 0, err
			}
			id = kernels.Argmax(logits)
		}
		perLayer := m.TrunkLayerBytes()
		var out []LayerTiming
		for i := 0; i < m.Bound; i++ {
			b := perLayer[i]
			if !m.Cfg.IsDense(i) {
				b += int64(m.Cfg.TopK) * m.Experts().ExpertBytes()
			}
			out = append(out, LayerTiming{Layer: i, Kind: layerKind(m, i), Bytes: b,
				Seconds: e.LayerSeconds[i] / float64(tokens)})
		}
		return out, prefill, nil
	}
	logf("resident: trunk in RAM, every expert cached")
	if res.Resident, res.PrefillTokensPerS, err = run(engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}}, false); err != nil {
		return nil, err
	}
	if err := ram(); err != nil {
		return nil, err
	}
	res.PrefillTokens = len(prompt)
	// the smallest budgets: one ring slot, so a layer's read starts when the
	// layer is needed (no read-ahead: the 3-layer benchmark model would fit
	// whole in two slots of its largest layer, and then nothing streams)
	logf("streamed: every layer from the packed trunk through one ring slot (no read-ahead), the smallest expert cache, caches dropped")
	if res.Streamed, _, err = run(engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}}, true); err != nil {
		return nil, err
	}
	if err := disk("after"); err != nil {
		return nil, err
	}
	for i := range res.Resident {
		res.Resident[i].LimitSeconds = float64(res.Resident[i].Bytes) / (res.RAMGBps * 1e9)
	}
	for i := range res.Streamed {
		res.Streamed[i].LimitSeconds = float64(res.Streamed[i].Bytes) / (res.DiskGBps * 1e9)
	}
	return res, nil
}
