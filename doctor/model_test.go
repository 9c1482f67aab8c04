package doctor

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine"
	"k3/engine/plan"
	"k3/internal/fixture"
	"k3/storage/config"
)

// The embedded config is the released one.
func TestEmbeddedConfigIsReleased(t *testing.T) {
	raw, err := os.ReadFile(fixture.Path("kimi-k3/released-config.json"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(raw, releasedConfig), "doctor/k3-config.json differs from testdata/kimi-k3/released-config.json")
}

// The released model's sizes, against reference/k3-model.md.
func TestK3Sizes(t *testing.T) {
	assert.Len(t, K3.LayerBytes, 93)
	assert.InDelta(t, 108.81e9, float64(K3.TrunkBytes), 0.01e9)
	assert.Equal(t, int64(17547264), K3.ExpertBytes)
	assert.Equal(t, 16*92, K3.ExpertsPerToken)
	assert.InDelta(t, 25.83e9, float64(K3.ExpertBytesPerToken()), 0.01e9)
	assert.Equal(t, int64(163840*7168*2), K3.LMHeadBytes)
	assert.InDelta(t, 1.45e12, float64(K3.ExpertPoolBytes), 0.01e12)
}

// The doctor's plan from the config alone is the engine's plan from the
// checkpoint: every part but the process base (which the engine measures).
func TestInputsAreTheEnginePlan(t *testing.T) {
	dir := fixture.ModelDir("tiny-release")
	cfg, err := config.Load(dir + "/config.json")
	require.NoError(t, err)
	m := ModelOf(cfg)
	em, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1}})
	require.NoError(t, err)
	require.Equal(t, em.TrunkLayerBytes(), m.LayerBytes)
	em.Close()
	total, err := engine.TrunkBytes(dir, 0)
	require.NoError(t, err)
	require.Equal(t, total, m.TrunkBytes+m.GlobalBytes)
	for _, b := range []plan.Budget{
		{TrunkGB: 1, CacheGB: 1},                        // everything pinned, cache capped at the experts there are
		{TrunkGB: 0.0002, CacheGB: 0.00001},             // streamed, cache at its minimum
		{TrunkGB: 0.0004, CacheGB: 0.0001},              // some layers pinned
		{TrunkGB: 0.0002, CacheGB: 0.0001, Ultra: true}, // model tables streamed
	} {
		for _, pos := range []int{1, 100, 4096} {
			t.Run(fmt.Sprintf("%+v/%d", b, pos), func(t *testing.T) {
				// a trunk folder makes the run a streamed one; PlanFor reads only the checkpoint
				want, err := engine.PlanFor(dir, engine.Options{TrunkDir: "streamed", Budget: engine.Budget{TrunkBytes: int64(b.TrunkGB * plan.GB), Ring: PlanRing,
					CacheBytes: int64(b.CacheGB * plan.GB), Ultra: b.Ultra}, Positions: pos, Chunk: PlanChunk,
					StateCopies: plan.ChatStateCopies(int64(b.TrunkGB*plan.GB), b.Ultra)})
				require.NoError(t, err)
				got := plan.Make(m.Inputs(b, pos))
				got.Total += want.Baseline - got.Baseline
				got.Baseline = want.Baseline
				got.ChunkWhy = want.ChunkWhy // the engine names the chunk it was given forced
				assert.Equal(t, want, got)
			})
		}
	}
}

// One auto: the doctor recommends what plan.Resolve("auto") picks, and
// never a preset whose plan Check refuses on the same memory; below the
// smallest preset's plan it recommends nothing.
func TestChooseNeverRefused(t *testing.T) {
	sp := Speeds{TrunkDiskGBps: 3, ExpertDiskGBps: 3, BF16GBps: 10, MXFP4GBps: 4}
	for _, gb := range []float64{1, 2, 3, 4, 4.5, 5, 6, 8, 9, 10, 10.5, 12, 16, 24, 32, 33, 34, 36, 48, 64, 96, 100, 101, 110, 128, 135, 140, 150, 192, 224, 240, 250, 300, 1000} {
		for _, cg := range []bool{false, true} {
			mem := plan.Memory{TotalBytes: int64(2 * gb * 1e9), AvailableBytes: int64(gb * 1e9)}
			if cg { // the same headroom under a cgroup limit
				mem = plan.Memory{TotalBytes: 2e12, AvailableBytes: 1e12, CgroupLimit: int64(gb*1e9) + 5e9, CgroupUsage: 5e9}
			}
			pred, ok := Choose(mem, sp)
			b, err := plan.Resolve("auto", &mem, Need)
			if !ok {
				assert.Error(t, err, "%v GB", gb)
				assert.Error(t, K3.Plan(plan.Presets[0].Budget()).Check(mem), "%v GB: ultra fits but nothing recommended", gb)
				continue
			}
			require.NoError(t, err)
			assert.Equal(t, b.Preset, pred.Name, "%v GB", gb)
			p, _ := plan.Lookup(pred.Name)
			assert.NoError(t, K3.Plan(p.Budget()).Check(mem), "%v GB: the doctor recommends %s, which the plan refuses", gb, pred.Name)
			assert.Equal(t, PeakRSS(p), pred.PredictedPeakRSSBytes)
			// the largest: the next preset up does not fit
			for i, q := range plan.Presets {
				if q.Name == pred.Name && i+1 < len(plan.Presets) {
					assert.Error(t, K3.Plan(plan.Presets[i+1].Budget()).Check(mem), "%v GB: %s fits too", gb, plan.Presets[i+1].Name)
				}
			}
		}
	}
	_, ok := Choose(plan.Memory{}, sp)
	assert.False(t, ok, "unknown memory")
}
