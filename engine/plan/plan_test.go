package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/internal/fixture"
	"k3/storage/config"
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
// hold two of the 2.34 GB dense layer, but it still reads the next layer
// while one computes, everywhere but next to layer 0; at ultra wherever a
// KDA layer and an MLA layer are next to each other. The ring is sized to
// what it holds in flight, not to the budget: at laptop two KDA layers
// (2.53 GB, not 3.00), at ultra the dense layer 0 (2.34 GB, not 2.50: a
// KDA and an MLA layer, 2.11 GB, fit in it), and at the same layers as a
// ring of the whole budget.
func TestRingAtTheFloor(t *testing.T) {
	for _, c := range []struct {
		preset  string
		slots   int
		fitting int
		ring    int64
	}{{"laptop", 2, 91, 2*1_267_449_216 + 2*RingSlack}, {"ultra", 2, 46, 2_340_918_144 + RingSlack}} {
		pr, _ := Lookup(c.preset)
		in := Inputs{LayerBytes: k3Layers(), Streaming: true, TrunkBudget: int64(pr.TrunkGB * GB), Ring: 2}
		p := Make(in)
		if p.PinnedBytes != 0 || p.SlotBytes != 2_340_918_144 || p.RingBytes != c.ring || p.RingSlots != c.slots {
			t.Fatalf("%s: plan %+v", c.preset, p)
		}
		if want := fmt.Sprintf("holds 2 layers in flight at %d of the 93 streamed layers", c.fitting); !strings.Contains(p.String(), want) {
			t.Fatalf("%s: the plan does not say %q:\n%s", c.preset, want, p)
		}
		// the same layers in flight as a ring of the whole budget
		slots, fitting := ringSlots(k3Layers(), int64(pr.TrunkGB*GB), 2)
		assert.Equal(t, []int{c.slots, c.fitting}, []int{slots, fitting}, c.preset)
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
	assert.Equal(t, Budget{Preset: "ultra", TrunkGB: 2.5, CacheGB: 0.16, Ultra: true}, b)
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
	}{{3.65 / 0.95, ""}, {3.67 / 0.95, "ultra"}, {5.01 / 0.95, "laptop"}, {27.01 / 0.95, "desktop"}, {26.99 / 0.95, "laptop"}, {91.01 / 0.95, "workstation"}, {124.01 / 0.95, "server"}, {220.01 / 0.95, "max"}} {
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

// TestMakeCompressed: a compressed trunk (stored sizes below the bf16
// ones) is pinned whole and expanded to bf16 when the budget holds its
// bf16 size, to the byte; below that the layers stay compressed, all
// pinned while the stored sizes fit, else pinned and streamed by the
// stored sizes.
func TestMakeCompressed(t *testing.T) {
	in := Inputs{LayerBytes: []int64{300, 80, 80, 80}, LogicalLayerBytes: []int64{400, 100, 100, 100},
		Streaming: true, Ring: 2, GlobalBytes: 11, BaselineRSS: 13}
	in.TrunkBudget = 700 // the bf16 trunk, exactly
	p := Make(in)
	assert.True(t, p.Compressed)
	assert.True(t, p.Expanded)
	assert.Equal(t, []bool{true, true, true, true}, p.Pinned)
	assert.Equal(t, int64(700), p.PinnedBytes, "pinned at the bf16 sizes")
	assert.Zero(t, p.RingSlots)
	assert.Zero(t, p.RingBytes)
	// loading holds the largest layer as read (300) next to the expanded
	// ones; nothing else is allocated yet, so it is the peak
	assert.Equal(t, int64(300), p.Load)
	assert.Equal(t, int64(13+700+11+300), p.Total)
	assert.Contains(t, p.String(), "(4 of 4 layers, expanded to bf16 for speed)")
	assert.Contains(t, p.String(), "load buffer      300.00 B  (a compressed layer as read")
	in.StateBytes, in.KVPerPos, in.Positions = 250, 1, 100 // allocated after loading: 350 > 300
	assert.Equal(t, int64(13+700+11+350), Make(in).Total)
	in.StateBytes, in.KVPerPos, in.Positions = 0, 0, 0
	require.Len(t, p.Notes, 1)
	assert.Contains(t, p.Notes[0], "expanded to bf16 at load")

	in.TrunkBudget = 699 // a byte short: every layer still pins, compressed
	p = Make(in)
	assert.True(t, p.Compressed)
	assert.False(t, p.Expanded)
	assert.Equal(t, []bool{true, true, true, true}, p.Pinned)
	assert.Equal(t, int64(540), p.PinnedBytes, "pinned at the stored sizes")
	assert.Zero(t, p.RingSlots)
	assert.Zero(t, p.Load)
	assert.Equal(t, int64(13+540+11), p.Total)
	assert.NotContains(t, p.String(), "load buffer")
	assert.Contains(t, p.String(), "(4 of 4 layers, compressed)")
	assert.NotContains(t, p.String(), "expanded")
	assert.Contains(t, p.String(), "every layer is pinned compressed (BF16C, 540.00 B)")

	in.TrunkBudget = 539 // pins 300 with a ring of two 80s; at bf16 sizes 400 + 2x100 would not fit
	p = Make(in)
	assert.True(t, p.Compressed)
	assert.False(t, p.Expanded)
	assert.Equal(t, []bool{true, false, false, false}, p.Pinned)
	assert.Equal(t, int64(300), p.PinnedBytes)
	assert.Equal(t, 2, p.RingSlots)
	assert.Equal(t, int64(160), p.RingBytes)
	assert.Contains(t, p.String(), "(1 of 4 layers, compressed)")
	assert.Contains(t, p.String(), "largest 80.00 B; compressed)")
	assert.Contains(t, p.String(), "its layers stay compressed (BF16C, 540.00 B)")

	// nothing smaller (an f32 trunk packed with --compress): the plan of
	// an uncompressed trunk
	for _, budget := range []int64{1 << 40, 700, 539} {
		plain := Inputs{LayerBytes: in.LogicalLayerBytes, Streaming: true, Ring: 2, TrunkBudget: budget}
		same := plain
		same.LogicalLayerBytes = slices.Clone(plain.LayerBytes)
		assert.Equal(t, Make(plain), Make(same), budget)
		assert.False(t, Make(same).Compressed, budget)
	}
}

// TestMakeCompressedReleased: the released trunk (108.79 GB at bf16)
// compressed 1.25x. The server preset's 110 GB holds it at bf16: all 93
// layers pinned, expanded. The workstation's 60 GB does not: the layers
// stay compressed, and more of them pin than of the bf16 trunk.
func TestMakeCompressedReleased(t *testing.T) {
	logical := k3Layers()
	stored := make([]int64, len(logical))
	for i, b := range logical {
		stored[i] = b * 4 / 5
	}
	pinned := func(p *Plan) int { return strings.Count(fmt.Sprint(p.Pinned), "true") }
	for _, c := range []struct {
		preset   string
		expanded bool
		more     bool // more layers pin compressed than at bf16
	}{{"server", true, false}, {"workstation", false, true}, {"laptop", false, false}} {
		pr, _ := Lookup(c.preset)
		budget := int64(pr.TrunkGB * GB)
		z := Make(Inputs{LayerBytes: stored, LogicalLayerBytes: logical, Streaming: true, TrunkBudget: budget, Ring: 2})
		bf := Make(Inputs{LayerBytes: logical, Streaming: true, TrunkBudget: budget, Ring: 2})
		assert.Equal(t, c.expanded, z.Expanded, c.preset)
		assert.True(t, z.Compressed, c.preset)
		if c.expanded {
			assert.Equal(t, bf.Pinned, z.Pinned, c.preset)
			assert.Equal(t, bf.PinnedBytes, z.PinnedBytes, c.preset)
			assert.Equal(t, 93, pinned(z), c.preset)
			continue
		}
		assert.Equal(t, c.more, pinned(z) > pinned(bf), c.preset)
		assert.GreaterOrEqual(t, pinned(z), pinned(bf), c.preset)
		t.Logf("%s (%.1f GB): %d layers pinned compressed, %d at bf16", c.preset, pr.TrunkGB, pinned(z), pinned(bf))
	}
}

// ForModel hands the bf16 sizes to the plan as they are.
func TestForModelLogicalSizes(t *testing.T) {
	c, err := config.Load(fixture.ModelDir("tiny-release") + "/config.json")
	require.NoError(t, err)
	s := Sizes{LayerBytes: []int64{3, 4}, LogicalLayerBytes: []int64{5, 6}}
	in := ForModel(c, 2, s, Run{Streaming: true, TrunkBudget: 11})
	assert.Equal(t, s.LogicalLayerBytes, in.LogicalLayerBytes)
	assert.True(t, Make(in).Expanded)
	in.TrunkBudget = 10
	assert.False(t, Make(in).Expanded)
}

// Mapped buffers are counted in whole pages: from a packed trunk each
// pinned layer (at its bf16 size when expanded), the table runs and the
// ring; with or without one, the expert cache's arena.
func TestMakeCountsWholePages(t *testing.T) {
	const pg = 100
	in := Inputs{LayerBytes: []int64{250, 150, 120}, Streaming: true, TrunkBudget: 600, Ring: 1, GlobalBytes: 130, TableRuns: 3,
		ExpertBytes: 10, TopK: 3, CacheBudget: 95, BaselineRSS: 13, MappedPage: pg}
	p := Make(in)
	require.Equal(t, []bool{true, true, true}, p.Pinned)
	// layers 250->300, 150->200, 120->200; tables 130->200 plus two more
	// runs' page; cache 90->100
	assert.Equal(t, int64(50+50+80+70+2*pg+10), p.Pages)
	assert.Equal(t, 3+3+1, p.PagedBuffer)
	assert.Equal(t, int64(13+520+130+90)+p.Pages, p.Total)
	assert.Contains(t, p.String(), "whole pages")

	in.TrunkBudget = 250 + 150 // layer 0 pinned, a ring of one 150-byte slot
	p = Make(in)
	require.Equal(t, []bool{true, false, false}, p.Pinned)
	require.Equal(t, int64(150), p.RingBytes)
	assert.Equal(t, int64(50+70+2*pg+50+10), p.Pages)

	in.Streaming = false // from the shards: layers and tables on the heap
	assert.Equal(t, int64(10), Make(in).Pages, "only the expert cache's arena")
	in.MappedPage = 0
	p = Make(in)
	assert.Zero(t, p.Pages)
	assert.NotContains(t, p.String(), "whole pages")

	in = Inputs{LayerBytes: []int64{300, 80}, LogicalLayerBytes: []int64{400, 100}, Streaming: true, TrunkBudget: 500, Ring: 2,
		MappedPage: pg}
	p = Make(in)
	require.True(t, p.Expanded)
	assert.Equal(t, int64(0+0), p.Pages, "expanded at the bf16 sizes 400 and 100: whole pages already")
}

// ForModel maps the tables of a packed trunk in one run each: embedding,
// lm_head (unless tied) and final norms; in ultra mode only the last.
func TestForModelTableRuns(t *testing.T) {
	c := &config.Config{Layers: 1, Hidden: 8, KDAHeads: 1, KDAHeadDim: 2, ConvK: 2, VocabSize: 16, Heads: 1, QKNope: 1, QKRope: 1, Intermediate: 8, MLA: []bool{false}}
	s := Sizes{LayerBytes: []int64{10}, GlobalBytes: 30, TableBytes: 20}
	assert.Equal(t, 3, ForModel(c, 1, s, Run{Streaming: true}).TableRuns)
	assert.Equal(t, 1, ForModel(c, 1, s, Run{Streaming: true, Ultra: true}).TableRuns)
	assert.Zero(t, ForModel(c, 1, s, Run{}).TableRuns, "read from the shards")
	c.TieEmbeddings = true
	assert.Equal(t, 2, ForModel(c, 1, s, Run{Streaming: true}).TableRuns)
	assert.Equal(t, int64(HugePage), ForModel(c, 1, s, Run{}).MappedPage)
}
