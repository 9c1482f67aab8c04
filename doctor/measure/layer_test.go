package measure

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/plan"
	"k3/engine/synth"
)

// TestLayerSmall runs the layer benchmark's code on a small checkpoint:
// every layer gets a time and a byte count, streamed reads really happen,
// and the limits are the best of the measurements before and after.
func TestLayerSmall(t *testing.T) {
	defer func(b int, d time.Duration) { layerRAMBytes, layerRAMTime = b, d }(layerRAMBytes, layerRAMTime)
	layerRAMBytes, layerRAMTime = 64<<20, 100*time.Millisecond
	dir := t.TempDir()
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	model, tr, err := PrepareLayer(context.Background(), dir, spec, t.Logf)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "layer"), filepath.Dir(model))
	runs, err := TrunkRuns(tr)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	ring := MinRing(runs, 2)
	cases := []OverlapCase{
		{Name: "ring", Streamed: true, Budget: engine.Budget{TrunkBytes: ring, Ring: 2, CacheBytes: 1}},
		{Name: "resident", Budget: engine.Budget{CacheBytes: 1}},
	}
	r, err := Layer(context.Background(), model, tr, LayerConfig{Threads: 1, Tokens: 2, Overlap: cases, OverlapRounds: 3, OverlapTokens: 2,
		KernelRounds: 2, Logf: t.Logf})
	require.NoError(t, err)
	assert.Equal(t, runs, r.TrunkRuns)

	// the overlap cases: the ring holds two layers at each of the three,
	// the resident case streams none; every round is kept, the one of
	// median efficiency reported
	require.Len(t, r.Overlap, 2)
	o := r.Overlap[0]
	assert.Equal(t, cases[0], o.Case)
	assert.Equal(t, ring, o.RingBytes)
	assert.Equal(t, 2, o.RingSlots)
	assert.Equal(t, 3, o.StreamedLayers)
	assert.Equal(t, 3, o.InFlight)
	assert.Zero(t, r.Overlap[1].StreamedLayers)
	assert.Zero(t, r.Overlap[1].RingSlots)
	for _, o := range r.Overlap {
		require.Len(t, o.Runs, 3)
		assert.Contains(t, o.Runs, o.Overlap)
		eff := []float64{o.Runs[0].Efficiency, o.Runs[1].Efficiency, o.Runs[2].Efficiency}
		slices.Sort(eff)
		assert.Equal(t, eff[1], o.Overlap.Efficiency)
		for _, run := range o.Runs {
			assert.Equal(t, 2, run.Tokens)
			assert.Positive(t, run.WallSeconds)
			assert.Positive(t, run.BytesRead, "experts are read from disk in both cases")
			assert.InDelta(t, max(run.ReadSeconds, run.ComputeSeconds)/run.WallSeconds, run.Efficiency, 1e-12)
			assert.Greater(t, run.Efficiency, 0.0)
			assert.LessOrEqual(t, run.Efficiency, 1.0, "max(read, compute) cannot exceed the wall time")
		}
	}
	// streamed: every token reads the trunk too
	assert.Greater(t, o.Overlap.BytesRead, r.Overlap[1].Overlap.BytesRead)

	assert.Equal(t, "model.layers.1.self_attn.q_proj.weight", r.KernelName)
	assert.Equal(t, spec.KDAHeads*spec.KDAHeadDim, r.Kernel.Rows)
	assert.Equal(t, spec.Hidden, r.Kernel.Cols)
	assert.Len(t, r.Kernel.BF16CRuns, 2)
	assert.Greater(t, r.KernelRatio, 1.25, "uniform weights compress like trained ones")
	require.Len(t, r.Resident, 3)
	require.Len(t, r.Streamed, 3)
	assert.Positive(t, r.RAMGBps)
	assert.Positive(t, r.DiskGBps)
	assert.Positive(t, r.PrefillTokensPerS)
	assert.Equal(t, 64, r.PrefillTokens)
	assert.Equal(t, 1, r.Threads)
	assert.Equal(t, 1, r.StreamRingSlots, "streamed through one ring slot")

	require.Len(t, r.RAMRuns, 2)
	assert.Equal(t, max(r.RAMRuns[0], r.RAMRuns[1]), r.RAMGBps)
	nc := len(limitReads)
	require.Len(t, r.DiskRuns, 2*nc)
	best := 0.0
	for i, d := range r.DiskRuns {
		c := limitReads[i%nc]
		assert.Equal(t, []string{"before", "after"}[i/nc], d.When, "disk run %d", i)
		assert.Equal(t, c.QD, d.QD, "disk run %d", i)
		assert.Equal(t, c.Request, d.Request, "disk run %d", i)
		assert.Positive(t, d.Bytes, "disk run %d", i)
		assert.Equal(t, r.DiskRuns[0].Bytes, d.Bytes, "every run reads the same shards")
		best = max(best, d.GBps)
	}
	assert.Equal(t, best, r.DiskGBps)

	kinds := []string{"kda+dense", "kda+moe", "mla+moe"}
	for i, l := range r.Resident {
		s := r.Streamed[i]
		assert.Equal(t, LayerTiming{Layer: i, Kind: kinds[i], Bytes: l.Bytes, Seconds: l.Seconds, LimitSeconds: float64(l.Bytes) / (r.RAMGBps * 1e9)}, l)
		assert.Equal(t, LayerTiming{Layer: i, Kind: kinds[i], Bytes: l.Bytes, Seconds: s.Seconds, LimitSeconds: float64(l.Bytes) / (best * 1e9)}, s,
			"resident and streamed layers touch the same bytes")
		assert.Positive(t, l.Bytes)
		assert.Positive(t, l.Seconds)
		assert.Positive(t, s.Seconds)
	}
	// a layer's bytes are its trunk and, for MoE, its top-k experts: gate
	// and up (MoEInter x Latent) and down (Latent x MoEInter), MXFP4 at
	// half a byte a weight and one scale byte per 32
	m, err := engine.Open(model, engine.Options{})
	require.NoError(t, err)
	defer m.Close()
	trunkBytes := m.TrunkLayerBytes()
	expert := int64(3 * spec.MoEInter * spec.Latent * 17 / 32)
	for i, l := range r.Resident {
		want := trunkBytes[i]
		if i > 0 {
			want += int64(spec.TopK) * expert
		}
		assert.Equal(t, want, l.Bytes, "layer %d", i)
	}
}

func TestInFlight(t *testing.T) {
	sizes := []int64{5, 3, 2}
	assert.Equal(t, 1, InFlight(sizes, 5, 2)) // 3+2
	assert.Equal(t, 2, InFlight(sizes, 7, 2)) // and 2+5
	assert.Equal(t, 3, InFlight(sizes, 8, 2))
	assert.Equal(t, int64(8), MinRing(sizes, 2))
	assert.Equal(t, int64(10), MinRing(sizes, 3))
	assert.Equal(t, 3, InFlight(sizes, 5, 1))
}

// TestProjectTrunk: a layer's projected size counts its bf16 matrices at
// the given ratio plus their row offsets, and the rest as it is.
func TestProjectTrunk(t *testing.T) {
	dir := t.TempDir()
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	require.NoError(t, synth.Write(dir, spec))
	same, err := ProjectTrunk(dir, nil, 1)
	require.NoError(t, err)
	m, err := engine.Open(dir, engine.Options{})
	require.NoError(t, err)
	defer m.Close()
	require.Len(t, same, 3)
	for i, l := range same {
		assert.Equal(t, m.TrunkLayerBytes()[i], l.Bytes, "layer %d", i)
		assert.Greater(t, l.Compressed, l.Bytes, "ratio 1: only the row offsets added")
	}
	half, err := ProjectTrunk(dir, map[string]float64{KindAttnQ: 2}, 1)
	require.NoError(t, err)
	for i := range half {
		assert.Less(t, half[i].Compressed, same[i].Compressed, "layer %d has a q projection", i)
	}
	// layer 2 is MLA: kv_b_proj stays bf16 whatever its ratio
	kv, err := ProjectTrunk(dir, map[string]float64{KindAttnKV: 1e9}, 1)
	require.NoError(t, err)
	b := int64(spec.Heads * (spec.Nope + spec.VHead) * spec.KVLora * 2)
	assert.Greater(t, kv[2].Compressed, b)
}

// Issue 31 (k3 bench layer OOM-killed on a 24 GB machine): every
// measurement's model is closed, and its memory given back, before the
// next is opened; each measurement's plan is checked against the memory
// available then, and one that does not fit is refused, as k3 run refuses
// it.
func TestLayerReleasesEachMeasurementAndChecksItsPlan(t *testing.T) {
	defer func(b int, d time.Duration) { layerRAMBytes, layerRAMTime = b, d }(layerRAMBytes, layerRAMTime)
	layerRAMBytes, layerRAMTime = 64<<20, 100*time.Millisecond
	defer func(o func(string, engine.Options) (*engine.Model, error), c func(*engine.Model), f func()) {
		openModel, closeModel, freeMemory = o, c, f
	}(openModel, closeModel, freeMemory)
	live, opened, maxLive := 0, 0, 0
	var plans []int64
	var events []string
	openModel = func(dir string, o engine.Options) (*engine.Model, error) {
		m, err := engine.Open(dir, o)
		if err == nil {
			live++
			opened++
			maxLive = max(maxLive, live)
			plans = append(plans, m.Plan.Total)
			events = append(events, "open")
		}
		return m, err
	}
	closeModel = func(m *engine.Model) {
		live--
		m.Close()
		events = append(events, "close")
	}
	freeMemory = func() { events = append(events, "free") }
	spec := synth.Small()
	spec.Layers, spec.FullAttn = 3, []int{3}
	model, tr, err := PrepareLayer(context.Background(), t.TempDir(), spec, t.Logf)
	require.NoError(t, err)
	runs, err := TrunkRuns(tr)
	require.NoError(t, err)
	cases := []OverlapCase{
		{Name: "ring", Streamed: true, Budget: engine.Budget{TrunkBytes: MinRing(runs, 2), Ring: 2, CacheBytes: 1}},
		{Name: "resident", Budget: engine.Budget{CacheBytes: 1}},
	}
	memory := func(avail int64) func() (plan.Memory, error) {
		return func() (plan.Memory, error) { return plan.Memory{TotalBytes: avail, AvailableBytes: avail}, nil }
	}
	cfg := LayerConfig{Threads: 1, Tokens: 1, Overlap: cases, OverlapRounds: 2, OverlapTokens: 1, Memory: memory(64 << 30)}
	_, err = Layer(context.Background(), model, tr, cfg)
	require.NoError(t, err)
	assert.Equal(t, 2+2*len(cases), opened, "resident, streamed, then every case each round")
	assert.Equal(t, 1, maxLive, "a measurement's model is closed before the next is opened")
	assert.Zero(t, live)
	// and its memory is given back to the system before the next opens
	for i, ev := range events {
		if ev == "open" && i > 0 {
			assert.Equal(t, []string{"close", "free"}, events[i-2:i], "before open %d", i)
		}
	}

	// a machine smaller than the first measurement's plan: refused before
	// anything large is read, with the plan's numbers
	opened = 0
	slices.Sort(plans)
	cfg.Memory = memory(plans[0] / 2)
	_, err = Layer(context.Background(), model, tr, cfg)
	var pe *engine.PlanError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "the memory plan needs")
	assert.Zero(t, opened)
	assert.Zero(t, live)
}
