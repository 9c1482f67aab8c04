package measure

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"k3/engine"
	"k3/engine/plan"
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

// OverlapCase is one streamed decode Layer measures: how well its reads
// overlap its compute. Streamed: the layers come from the packed trunk
// through the ring Budget allows (else the trunk is resident); the routed
// experts are always read from disk into a cache of Budget.CacheBytes
// (1: the minimum, so a token reads all of its experts).
type OverlapCase struct {
	Name     string
	Streamed bool
	Budget   engine.Budget
}

// OverlapResult is an OverlapCase measured: the plan the benchmark
// checkpoint got and the decode of median efficiency of the rounds.
type OverlapResult struct {
	Case           OverlapCase
	RingBytes      int64 // the ring the plan made (0: nothing streamed)
	RingSlots      int
	StreamedLayers int
	InFlight       int // streamed layers read while the one before computes: InFlight(TrunkRuns, RingBytes, RingSlots)
	Overlap        Overlap
	Runs           []Overlap // every round, in order
}

// LayerConfig says what Layer measures besides the per-layer times.
type LayerConfig struct {
	Threads int // 0: physical cores
	Tokens  int // decode steps of the per-layer timings
	// Overlap cases are measured in turns, OverlapRounds times (0: once),
	// each decoding OverlapTokens (0: 4) after an 8-token prompt.
	Overlap       []OverlapCase
	OverlapRounds int
	OverlapTokens int
	// KernelRounds of BF16CKernel on a bf16 trunk matrix of the checkpoint
	// (0: no kernel measurement).
	KernelRounds int
	// KernelMatrix names that matrix (its name after the checkpoint's
	// prefix); "" is layer 1's q_proj.
	KernelMatrix string
	Logf         func(string, ...any)
	// Memory reads the memory available to this process; each
	// measurement's plan is checked against it before the model is opened
	// and a plan that does not fit is refused, as k3 run refuses it. nil:
	// no check.
	Memory func() (plan.Memory, error)
}

// openModel and closeModel open and close each measurement's model (tests
// count them).
var (
	openModel  = engine.Open
	closeModel = (*engine.Model).Close
	freeMemory = debug.FreeOSMemory
)

// open opens one measurement's model with its plan checked against the
// memory available now (cfg.Memory), after what the measurement before it
// released.
func (cfg LayerConfig) open(model string, o engine.Options) (*engine.Model, error) {
	if cfg.Memory != nil {
		if mem, err := cfg.Memory(); err == nil {
			o.Memory = &mem
		}
	}
	return openModel(model, o)
}

// release closes a measurement's model and engine and gives their memory
// back to the system before the next measurement opens its own: the Go
// collector would otherwise let the heap grow to twice the largest live
// heap so far (the resident run's whole checkpoint) before collecting, so
// the overlap runs stacked their buffers on the resident run's garbage
// (24.4 GB anonymous on a 24 GB machine).
func release(m *engine.Model, e *engine.Engine) {
	if e != nil {
		e.Close()
	}
	closeModel(m)
	freeMemory()
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
	TrunkRuns         []int64 // bytes of each layer's run in the packed trunk (what the ring holds)
	Overlap           []OverlapResult
	// Kernel is BF16C against bf16 on KernelName, and KernelRatio that
	// matrix's BF16C ratio (the checkpoint's synthetic weights).
	Kernel      KernelSpeeds
	KernelName  string
	KernelRatio float64
}

// PrepareLayer generates (once, reused) the real-width checkpoint and
// its packed trunk under dir.
func PrepareLayer(ctx context.Context, dir string, spec synth.Spec, logf func(string, ...any)) (model, tr string, err error) {
	return prepare(ctx, filepath.Join(dir, "layer"), spec, logf)
}

// Layer measures per-layer decode time with everything resident and
// with the trunk and experts streamed cold from disk, and prefill speed.
func Layer(ctx context.Context, model, tr string, cfg LayerConfig) (*LayerResult, error) {
	b := &layerBench{ctx: ctx, model: model, tr: tr, cfg: cfg, tokens: max(cfg.Tokens, 1), logf: cfg.Logf, res: &LayerResult{}}
	if b.logf == nil {
		b.logf = func(string, ...any) {}
	}
	// the RAM and disk limits are measured before and after the runs they
	// bound, and the better kept: on a shared machine both drift
	for _, phase := range []func() error{b.trunkRuns, b.ram, b.diskBefore, b.resident, b.ram, b.streamed, b.overlap, b.kernel, b.diskAfter} {
		if err := phase(); err != nil {
			return nil, err
		}
	}
	for i := range b.res.Resident {
		b.res.Resident[i].LimitSeconds = float64(b.res.Resident[i].Bytes) / (b.res.RAMGBps * 1e9)
	}
	for i := range b.res.Streamed {
		b.res.Streamed[i].LimitSeconds = float64(b.res.Streamed[i].Bytes) / (b.res.DiskGBps * 1e9)
	}
	return b.res, nil
}

// layerBench is one run of Layer: its phases are its methods.
type layerBench struct {
	ctx       context.Context
	model, tr string // the checkpoint and its packed trunk
	cfg       LayerConfig
	tokens    int      // decode steps timed per run
	files     []string // the checkpoint's shards
	logf      func(string, ...any)
	res       *LayerResult
}

// layerPrompt is the prompt every timed run decodes after.
func layerPrompt() []int {
	prompt := make([]int, 64)
	for i := range prompt {
		prompt[i] = (1000 + 37*i) % 512 // inside any vocabulary the benchmark generates
	}
	return prompt
}

// trunkRuns reads the packed trunk's run per layer, and lists the shards.
func (b *layerBench) trunkRuns() error {
	var err error
	if b.res.TrunkRuns, err = TrunkRuns(b.tr); err != nil {
		return err
	}
	b.files, err = shardPaths(b.model)
	return err
}

// ram measures the RAM read bandwidth on every thread (the best run counts).
func (b *layerBench) ram() error {
	res := b.res
	pool := kernels.NewPool(b.cfg.Threads)
	defer pool.Close()
	res.Threads = pool.Threads()
	bw, err := RAM(pool, layerRAMBytes, layerRAMTime)
	if err != nil {
		return err
	}
	res.RAMRuns = append(res.RAMRuns, bw)
	res.RAMGBps = max(res.RAMGBps, bw)
	b.logf("RAM read bandwidth: %.1f GB/s (%d threads)", bw, res.Threads)
	return nil
}

func (b *layerBench) diskBefore() error { return b.disk("before") }
func (b *layerBench) diskAfter() error  { return b.disk("after") }

// disk measures raw O_DIRECT reads of the shards (the best run counts).
func (b *layerBench) disk(when string) error {
	runs, err := LimitRuns(b.ctx, b.files, layerDiskBytes, when)
	for _, r := range runs {
		b.res.DiskRuns = append(b.res.DiskRuns, r)
		b.res.DiskGBps = max(b.res.DiskGBps, r.GBps)
		b.logf("raw O_DIRECT read, %s: %.2f GB/s", r, r.GBps)
	}
	return err
}

// resident times every layer and prefill with the trunk in RAM and every
// expert cached.
func (b *layerBench) resident() error {
	b.logf("resident: trunk in RAM, every expert cached")
	var err error
	b.res.Resident, b.res.PrefillTokensPerS, err = b.run(engine.Options{Budget: engine.Budget{CacheBytes: 1 << 40}}, false)
	b.res.PrefillTokens = len(layerPrompt())
	return err
}

// streamed times every layer at the smallest budgets: one ring slot, so a
// layer's read starts when the layer is needed (no read-ahead: the 3-layer
// benchmark model would fit whole in two slots of its largest layer, and
// then nothing streams).
func (b *layerBench) streamed() error {
	b.logf("streamed: every layer from the packed trunk through one ring slot (no read-ahead), the smallest expert cache, caches dropped")
	var err error
	b.res.Streamed, _, err = b.run(engine.Options{TrunkDir: b.tr, Budget: engine.Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}}, true)
	return err
}

func (b *layerBench) overlap() (err error) {
	b.res.Overlap, err = measureOverlap(b.ctx, b.model, b.tr, b.cfg, b.res.TrunkRuns, b.logf)
	return err
}

func (b *layerBench) kernel() error {
	if b.cfg.KernelRounds <= 0 {
		return nil
	}
	return layerKernel(b.model, b.cfg, b.res, b.logf)
}

// run opens the model with opt and times each layer over the decode steps
// after the prompt (cold: the caches dropped before the first step); it
// returns the layers' timings and the prefill speed.
func (b *layerBench) run(opt engine.Options, cold bool) ([]LayerTiming, float64, error) {
	ctx, prompt := b.ctx, layerPrompt()
	opt.Positions, opt.Chunk = len(prompt)+b.tokens+1, 64
	m, err := b.cfg.open(b.model, opt)
	if err != nil {
		return nil, 0, err
	}
	var e *engine.Engine
	defer func() { release(m, e) }()
	p := m.Plan
	if opt.TrunkDir != "" {
		b.res.StreamRingSlots = p.RingSlots
		if p.PinnedBytes > 0 || p.RingSlots != 1 {
			return nil, 0, fmt.Errorf("the streamed run should stream every layer through one ring slot; the plan pins %d bytes and has %d slots", p.PinnedBytes, p.RingSlots)
		}
	}
	e = m.NewEngine(b.cfg.Threads)
	// prefill twice: the first run reads the experts, the second is
	// timed; then the caches are dropped (cold) before the first
	// decode step, and every decode step's layers are timed
	if _, err := e.Feed(ctx, m.NewState(), prompt, false); err != nil {
		return nil, 0, err
	}
	seconds := make([]float64, m.Bound)
	res, err := e.Generate(ctx, nil, prompt, engine.GenOptions{MaxTokens: b.tokens + 1, Spec: engine.SpecOff,
		OnToken: func(ev engine.Event) bool {
			if ev.Step == 0 && cold {
				dropPaths(append(b.files, filepath.Join(b.tr, trunk.BinFile)))
			}
			return false
		},
		Trace: &engine.GenTrace{LayerTimes: true, OnPass: func(p engine.PassStats) {
			for i, s := range p.LayerSeconds {
				seconds[i] += s
			}
		}}})
	if err != nil {
		return nil, 0, err
	}
	return layerTimings(m, seconds, b.tokens), float64(len(prompt)) / res.PrefillSeconds, nil
}

// layerTimings are m's layers with the bytes a decode step reads of each
// and its mean time over tokens steps.
func layerTimings(m *engine.Model, seconds []float64, tokens int) []LayerTiming {
	perLayer := m.TrunkLayerBytes()
	var out []LayerTiming
	for i := 0; i < m.Bound; i++ {
		b := perLayer[i]
		if !m.Cfg.IsDense(i) {
			b += int64(m.Cfg.TopK) * m.Experts().ExpertBytes()
		}
		out = append(out, LayerTiming{Layer: i, Kind: m.Cfg.LayerKind(i), Bytes: b,
			Seconds: seconds[i] / float64(tokens)})
	}
	return out
}

// measureOverlap decodes every case OverlapRounds times, in turns.
func measureOverlap(ctx context.Context, model, tr string, cfg LayerConfig, runs []int64, logf func(string, ...any)) ([]OverlapResult, error) {
	out := make([]OverlapResult, len(cfg.Overlap))
	tokens := cfg.OverlapTokens
	if tokens <= 0 {
		tokens = 4
	}
	prompt := []int{1, 2, 3, 4, 5, 6, 7, 8}
	for round := range max(cfg.OverlapRounds, 1) {
		for i, c := range cfg.Overlap {
			o := engine.Options{Budget: c.Budget, Chunk: 16, Positions: len(prompt) + tokens + 1}
			if c.Streamed {
				o.TrunkDir = tr
			}
			m, err := cfg.open(model, o)
			if err != nil {
				return nil, fmt.Errorf("overlap %s: %w", c.Name, err)
			}
			r := &out[i]
			r.Case, r.RingBytes, r.RingSlots = c, m.Plan.RingBytes, m.Plan.RingSlots
			var streamed []int64
			for li, pinned := range m.Plan.Pinned {
				if c.Streamed && !pinned {
					streamed = append(streamed, runs[li])
				}
			}
			r.StreamedLayers = len(streamed)
			if len(streamed) > 0 {
				r.InFlight = InFlight(streamed, r.RingBytes, r.RingSlots)
			}
			e := m.NewEngine(cfg.Threads)
			ov, err := MeasureOverlap(ctx, e, prompt, tokens)
			release(m, e)
			if err != nil {
				return nil, fmt.Errorf("overlap %s: %w", c.Name, err)
			}
			logf("overlap %s, round %d: %.2f s/token, read %.2f, compute %.2f: efficiency %.2f", c.Name, round+1,
				ov.SecondsPerToken(), ov.ReadSeconds/float64(ov.Tokens), ov.ComputeSeconds/float64(ov.Tokens), ov.Efficiency)
			r.Runs = append(r.Runs, ov)
		}
	}
	for i := range out {
		out[i].Overlap = medianOverlap(out[i].Runs)
	}
	return out, nil
}

// medianOverlap is the run of median efficiency (the lower middle one of
// an even count), so its numbers stay one run's.
func medianOverlap(runs []Overlap) Overlap {
	s := slices.Clone(runs)
	slices.SortStableFunc(s, func(a, b Overlap) int { return cmp.Compare(a.Efficiency, b.Efficiency) })
	return s[(len(s)-1)/2]
}

// layerKernel times BF16C against bf16 on one trunk matrix of the
// checkpoint.
func layerKernel(model string, cfg LayerConfig, res *LayerResult, logf func(string, ...any)) error {
	name := cfg.KernelMatrix
	if name == "" {
		name = "model.layers.1.self_attn.q_proj.weight"
	}
	ms, err := checkpointMatrices(model, "bench", func(n string) bool { return strings.HasSuffix(n, name) })
	if err != nil {
		return err
	}
	if len(ms) != 1 {
		return fmt.Errorf("the benchmark checkpoint has %d bf16 matrices named %s", len(ms), name)
	}
	w := ms[0]
	m := &kernels.Mat{DType: kernels.BF16, Rows: w.Rows, Cols: w.Cols, BF16: w.W}
	pool := kernels.NewPool(cfg.Threads)
	defer pool.Close()
	logf("BF16C against bf16: mat-vec of %s (%dx%d), %d rounds", name, w.Rows, w.Cols, cfg.KernelRounds)
	res.Kernel = BF16CKernel(pool, m, cfg.KernelRounds, 500*time.Millisecond)
	res.KernelName = name
	res.KernelRatio = CompressStats(ms)[0].BlockRatio
	logf("  bf16 %.2f GB/s, bf16c %.2f GB/s logical (%.2fx the time); that matrix's BF16C ratio %.3f", res.Kernel.BF16GBps, res.Kernel.BF16CGBps, res.Kernel.Slowdown, res.KernelRatio)
	return nil
}

// TrunkRuns is each layer's run length in the packed trunk tr: the bytes a
// streamed layer takes in the ring.
func TrunkRuns(tr string) ([]int64, error) {
	trk, err := trunk.Open(tr)
	if err != nil {
		return nil, err
	}
	defer trk.Close()
	out := make([]int64, trk.Layers())
	for i := range out {
		r, _ := trk.LayerRun(i)
		out[i] = r.Length
	}
	return out, nil
}

// InFlight is for how many of the streamed layers (sizes, in decode order,
// cyclic: the next token's first layer follows the last) a ring of
// ringBytes holds that layer and the slots-1 after it: the layers whose
// successors are read while they compute. The plan counts the same.
func InFlight(sizes []int64, ringBytes int64, slots int) int {
	n := 0
	for i := range sizes {
		var sum int64
		for j := 0; j < slots; j++ {
			sum += sizes[(i+j)%len(sizes)]
		}
		if sum <= ringBytes {
			n++
		}
	}
	return n
}

// MinRing is the smallest ring that holds slots consecutive streamed
// layers at every one of them.
func MinRing(sizes []int64, slots int) int64 {
	var m int64
	for i := range sizes {
		var sum int64
		for j := 0; j < slots; j++ {
			sum += sizes[(i+j)%len(sizes)]
		}
		m = max(m, sum)
	}
	return m
}
