package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMakePinsLargestFirst(t *testing.T) {
	in := Inputs{LayerBytes: []int64{500, 100, 100, 300, 100, 100, 100}, Streaming: true, TrunkBudget: 1000, Ring: 2,
		ExpertBytes: 10, TopK: 3, CacheBudget: 95, KVPerPos: 2, Positions: 50, StateBytes: 7, BufferBytes: 3, GlobalBytes: 11, BaselineRSS: 13}
	p := Make(in)
	// pin 500 (ring 2x300=600 -> 1100 > 1000? no: 500+600 = 1100 > 1000, so nothing pinned)
	// so k=0: slot = 500, ring 2 slots = 1000 fits exactly
	if p.PinnedBytes != 0 || p.SlotBytes != 500 || p.RingSlots != 2 {
		t.Fatalf("plan %+v", p)
	}
	in.TrunkBudget = 1200 // pins 500, 300, 100, 100 (each step leaves room for 2 slots of the next)
	p = Make(in)
	if p.PinnedBytes != 1000 || p.SlotBytes != 100 || !p.Pinned[0] || !p.Pinned[3] || !p.Pinned[1] || !p.Pinned[2] || p.Pinned[4] {
		t.Fatalf("plan %+v", p)
	}
	if p.CacheSlots != 9 || p.CacheBytes != 90 || p.KV != 100 {
		t.Fatalf("cache/kv %+v", p)
	}
	if p.Total != 13+1000+200+90+11+7+100+3 {
		t.Fatalf("total %d", p.Total)
	}
	in.TrunkBudget = 5000 // everything fits: all pinned, no ring
	p = Make(in)
	if p.PinnedBytes != 1300 || p.RingSlots != 0 {
		t.Fatalf("plan %+v", p)
	}
	in.TrunkBudget, in.CacheBudget = 10, 1 // below the minimum working set
	p = Make(in)
	// one largest layer of ring, which holds two of the others at a time
	if p.RingBytes != 500 || p.RingSlots != 2 || p.CacheSlots != 4 || len(p.Notes) != 3 || !strings.Contains(p.String(), "running at the minimum") {
		t.Fatalf("minimum plan %+v\n%s", p, p)
	}
	in.Ring = 1
	if p = Make(in); p.RingBytes != 500 || p.RingSlots != 1 {
		t.Fatalf("ring 1 plan %+v\n%s", p, p)
	}
}

// k3Layers are the released checkpoint's trunk layer sizes: layer 0 is KDA
// + the dense MLP, MLA + MoE every fourth layer from 3 and the last one,
// KDA + MoE the rest (108.79 GB in all).
func k3Layers() []int64 {
	b := make([]int64, 93)
	for i := range b {
		switch {
		case i == 0:
			b[i] = 2_340_918_144
		case i%4 == 3 || i == 92:
			b[i] = 844_335_616
		default:
			b[i] = 1_267_449_216
		}
	}
	return b
}

// TestRingAtTheFloor: at the laptop preset (the 8 GB floor) the ring cannot
// hold two of the 2.34 GB dense layer, but it takes the whole 3 GB budget
// and so still reads the next layer while one computes, everywhere but
// next to layer 0.
func TestRingAtTheFloor(t *testing.T) {
	for _, c := range []struct {
		preset  string
		slots   int
		fitting int
	}{{"laptop", 2, 91}, {"ultra", 2, 46}} {
		pr, _ := Lookup(c.preset)
		p := Make(Inputs{LayerBytes: k3Layers(), Streaming: true, TrunkBudget: int64(pr.TrunkGB * GB), Ring: 2})
		if p.PinnedBytes != 0 || p.SlotBytes != 2_340_918_144 || p.RingBytes != int64(pr.TrunkGB*GB) || p.RingSlots != c.slots {
			t.Fatalf("%s: plan %+v", c.preset, p)
		}
		if want := fmt.Sprintf("holds 2 layers in flight at %d of the 93 streamed layers", c.fitting); !strings.Contains(p.String(), want) {
			t.Fatalf("%s: the plan does not say %q:\n%s", c.preset, want, p)
		}
	}
}

// Check tests a plan against the usable memory: MemAvailable lowered to the
// cgroup's headroom (the numbers of an 8 GiB cgroup with 1 GiB used).
func TestCheckUsable(t *testing.T) {
	m := Memory{TotalBytes: 24000000 * 1024, AvailableBytes: 20000000 * 1024, CgroupLimit: 8589934592, CgroupUsage: 1073741824}
	require.Equal(t, int64(8589934592-1073741824), m.Usable())
	p := &Plan{Total: 8e9}
	assert.ErrorContains(t, p.Check(m), "lower --trunk-gb", "plan over the cgroup limit accepted")
	p.Total = 6e9
	assert.NoError(t, p.Check(m))
	assert.Equal(t, int64(39936), Memory{TotalBytes: 102400, AvailableBytes: 51200, CgroupLimit: 40960, CgroupUsage: 1024}.Usable())
	assert.Equal(t, int64(0), Memory{AvailableBytes: 10, CgroupLimit: 5, CgroupUsage: 6}.Usable())
	assert.NoError(t, p.Check(Memory{}), "unknown memory: nothing to check against")
}

func TestResolve(t *testing.T) {
	b, err := Resolve("ultra", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, Budget{Preset: "ultra", TrunkGB: 2.5, CacheGB: 0.31, Ultra: true}, b)
	b, err = Resolve("desktop", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, Budget{Preset: "desktop", TrunkGB: 16, CacheGB: 10}, b)
	_, err = Resolve("huge", nil, nil)
	assert.ErrorIs(t, err, ErrUnknownPreset)

	// auto: the largest preset whose plan fits Check's 95% of the usable
	// memory; here a plan needs its two budgets plus 1 GB
	need := func(b Budget) int64 { return int64((b.TrunkGB + b.CacheGB + 1) * GB) }
	for _, c := range []struct {
		usable float64
		want   string
	}{{3.80 / 0.95, ""}, {3.82 / 0.95, "ultra"}, {5.01 / 0.95, "laptop"}, {27.01 / 0.95, "desktop"}, {26.99 / 0.95, "laptop"}, {91.01 / 0.95, "workstation"}, {124.01 / 0.95, "server"}, {220.01 / 0.95, "max"}} {
		mem := &Memory{TotalBytes: 1e12, AvailableBytes: int64(c.usable * GB)}
		b, err := Resolve("auto", mem, need)
		if c.want == "" {
			assert.ErrorContains(t, err, "even the ultra preset", "%v GB", c.usable)
			continue
		}
		require.NoError(t, err, "%v GB", c.usable)
		assert.Equal(t, c.want, b.Preset, "%v GB", c.usable)
		assert.NoError(t, (&Plan{Total: need(b)}).Check(*mem), "%v GB: auto picked %s, which Check refuses", c.usable, b.Preset)
	}
	// a cgroup's headroom counts
	b, err = Resolve("auto", &Memory{TotalBytes: 1e12, AvailableBytes: 1e12, CgroupLimit: 31e9, CgroupUsage: 2e9}, need)
	require.NoError(t, err)
	assert.Equal(t, "desktop", b.Preset)
	_, err = Resolve("auto", nil, need)
	assert.ErrorContains(t, err, "unknown")
	_, err = Resolve("auto", &Memory{}, need)
	assert.ErrorContains(t, err, "unknown")
}
