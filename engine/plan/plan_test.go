package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

func fakeTree(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for name, body := range files {
		path := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, []byte(body), 0o644)
	}
	return root
}

func TestReadMemoryCgroup(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"proc/meminfo":     "MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   20000000 kB\n",
		"proc/self/cgroup": "0::/user.slice/k3.scope\n",
		"sys/fs/cgroup/user.slice/k3.scope/memory.max": "max\n",
		"sys/fs/cgroup/user.slice/memory.max":          "8589934592\n",
		"sys/fs/cgroup/user.slice/memory.current":      "1073741824\n",
	})
	m, err := ReadMemoryAt(root)
	if err != nil {
		t.Fatal(err)
	}
	if m.TotalBytes != 24000000*1024 || m.AvailableBytes != 20000000*1024 || m.CgroupLimit != 8589934592 || m.CgroupUsage != 1073741824 {
		t.Fatalf("%+v", m)
	}
	if m.Usable() != 8589934592-1073741824 {
		t.Fatalf("usable %d", m.Usable())
	}
	p := &Plan{Total: 8e9}
	if err := p.Check(m); err == nil || !strings.Contains(err.Error(), "lower --trunk-gb") {
		t.Fatalf("plan over the cgroup limit accepted: %v", err)
	}
	p.Total = 6e9
	if err := p.Check(m); err != nil {
		t.Fatal(err)
	}
	// v1 and no cgroup
	root = fakeTree(t, map[string]string{
		"proc/meminfo":     "MemTotal: 100 kB\nMemAvailable: 50 kB\n",
		"proc/self/cgroup": "12:memory:/box\n",
		"sys/fs/cgroup/memory/box/memory.limit_in_bytes": "40960\n",
		"sys/fs/cgroup/memory/box/memory.usage_in_bytes": "1024\n",
	})
	m, _ = ReadMemoryAt(root)
	if m.CgroupLimit != 40960 || m.Usable() != 39936 {
		t.Fatalf("v1 %+v", m)
	}
	if _, err := ReadMemoryAt(t.TempDir()); err == nil {
		t.Fatal("missing meminfo accepted")
	}
}

func TestReadMemoryHere(t *testing.T) {
	m, err := ReadMemory()
	if err != nil {
		t.Skip("no /proc/meminfo:", err)
	}
	if m.TotalBytes <= 0 || m.AvailableBytes <= 0 || m.AvailableBytes > m.TotalBytes {
		t.Fatalf("%+v", m)
	}
	if CurrentRSS() <= 0 {
		t.Fatal("no RSS")
	}
}
