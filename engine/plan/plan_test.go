package plan

import (
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
	if p.RingSlots != 1 || p.CacheSlots != 4 || len(p.Notes) != 2 || !strings.Contains(p.String(), "running at the minimum") {
		t.Fatalf("minimum plan %+v\n%s", p, p)
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
