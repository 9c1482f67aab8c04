package doctor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
)

type fakeMem struct{ total, avail uint64 }

func (f fakeMem) Memory(context.Context) (uint64, uint64, error) { return f.total, f.avail, nil }

func TestCgroupV2Nested(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":                                  {Data: []byte("0::/user.slice/app.scope\n")},
		"sys/fs/cgroup/memory.max":                          {Data: []byte("max\n")},
		"sys/fs/cgroup/user.slice/memory.max":               {Data: []byte("8000000000\n")},
		"sys/fs/cgroup/user.slice/app.scope/memory.max":     {Data: []byte("max\n")},
		"sys/fs/cgroup/user.slice/app.scope/memory.current": {Data: []byte("1000000000\n")},
	}
	m, notes := readMemory(context.Background(), fakeMem{64e9, 50e9}, fsys)
	if m.CgroupVersion != 2 || m.CgroupLimitBytes == nil || *m.CgroupLimitBytes != 8e9 || m.AvailableBytes != 7e9 {
		t.Fatalf("v2: %+v", m)
	}
	if len(notes) == 0 {
		t.Fatal("no note about the cgroup")
	}
	// Unlimited v2: MemAvailable stands.
	fsys["sys/fs/cgroup/user.slice/memory.max"] = &fstest.MapFile{Data: []byte("max\n")}
	m, _ = readMemory(context.Background(), fakeMem{64e9, 50e9}, fsys)
	if m.CgroupLimitBytes != nil || m.AvailableBytes != 50e9 {
		t.Fatalf("unlimited: %+v", m)
	}
	// Garbled limit: fail closed.
	fsys["sys/fs/cgroup/user.slice/memory.max"] = &fstest.MapFile{Data: []byte("lots\n")}
	m, notes = readMemory(context.Background(), fakeMem{64e9, 50e9}, fsys)
	if m.AvailableBytes != 0 || !strings.Contains(strings.Join(notes, " "), "unreadable") {
		t.Fatalf("garbled: %+v %v", m, notes)
	}
}

func TestCgroupV1(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":                                      {Data: []byte("12:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n")},
		"sys/fs/cgroup/memory/memory.limit_in_bytes":            {Data: []byte("9223372036854771712\n")},
		"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": {Data: []byte("4294967296\n")},
		"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": {Data: []byte("294967296\n")},
	}
	m, _ := readMemory(context.Background(), fakeMem{32e9, 30e9}, fsys)
	if m.CgroupVersion != 1 || *m.CgroupLimitBytes != 4294967296 || m.AvailableBytes != 4e9 {
		t.Fatalf("v1: %+v", m)
	}
	// Namespaced: the path from /proc does not exist under the mount; the
	// mount's own files apply.
	fsys = fstest.MapFS{
		"proc/self/cgroup":                           {Data: []byte("4:memory:/process_api/xyz\n")},
		"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("2000000000\n")},
		"sys/fs/cgroup/memory/memory.usage_in_bytes": {Data: []byte("500000000\n")},
	}
	m, _ = readMemory(context.Background(), fakeMem{32e9, 30e9}, fsys)
	if m.CgroupLimitBytes == nil || *m.CgroupLimitBytes != 2e9 || m.AvailableBytes != 1.5e9 {
		t.Fatalf("namespaced v1: %+v", m)
	}
	// No cgroup at all.
	m, _ = readMemory(context.Background(), fakeMem{32e9, 30e9}, fstest.MapFS{})
	if m.CgroupVersion != 0 || m.CgroupLimitBytes != nil || m.AvailableBytes != 30e9 {
		t.Fatalf("none: %+v", m)
	}
}

func TestCostModel(t *testing.T) {
	// Peak RSS is the preset's memory plan (plan.Make over the released
	// config), no longer a constant per preset. Against the C engine's
	// published peaks (its presets' notes) it is within 0.7 GB from
	// desktop up; ultra (3.4 vs ~3 GB) is higher, on the safe side: its
	// trunk budget holds one ring slot of the whole 2.34 GB dense layer 0,
	// and the KV cache is planned for PlanPositions (a 4K-position
	// context); laptop (7.5 vs 8.2 GB) is lower: it streams the embedding
	// rows (TestFloorTargets).
	// The C engine has neither a copy of the KDA state to roll a cancelled
	// chunk back to (0.46 GB at K3 size) nor speculation's rollback record
	// (9 positions of 20.4 MB) nor a chat session's copies of the state
	// (plan.ChatCopies): the comparison leaves them out. At ultra and
	// laptop our ring also holds two layers where they fit (the C engine's
	// holds one layer) to read the next layer while one computes: 2.3 GB
	// of slack there.
	pub := map[string]float64{"ultra": 3.0, "laptop": 8.2, "desktop": 31.9, "workstation": 95.5, "server": 128, "max": 224}
	// at the floor (ultra, laptop) the plan holds the KDA state once and
	// one layer's scratch state (69 KDA layers), above it a rollback copy too
	kda := float64(K3.Plan(plan.Presets[0].Budget()).State) * 69 / 70
	assert.InDelta(t, 0.46e9, kda, 0.01e9, "the KDA state at K3 size")
	for _, p := range plan.Presets {
		pl := K3.Plan(p.Budget())
		rollback := kda
		if plan.Floor(int64(p.TrunkGB*plan.GB), p.Ultra) {
			rollback = 0
		}
		// the speculation record at K3 size: 9 positions, none at ultra
		// (no speculation there) beyond the one position a plain pass at
		// the floor records
		if p.Ultra {
			assert.InDelta(t, 20.4e6, float64(pl.Spec), 0.5e6, "the record of one position at ultra")
		} else {
			assert.InDelta(t, 9*20.4e6, float64(pl.Spec), 0.5e6, "the speculation record at K3 size")
		}
		got := float64(PeakRSS(p))
		// a chat session's copies of the state (the C engine keeps none):
		// none at ultra and laptop, a snapshot and two checkpoints above
		copies := plan.ChatStateCopies(int64(p.TrunkGB*plan.GB), p.Ultra)
		if p.Name == "ultra" || p.Name == "laptop" {
			assert.Zero(t, copies, p.Name)
		} else {
			assert.Equal(t, 3, copies, p.Name)
		}
		chatCopies := float64(copies) * (rollback + float64(pl.KV)/float64(1+copies))
		cEngine := (got - rollback - float64(pl.Spec) - chatCopies) / 1e9
		t.Logf("%-12s predicted peak %6.2f GB (%.2f GB without the rollback copy, speculation record and %d chat state copies), published %5.1f",
			p.Name, got/1e9, cEngine, copies, pub[p.Name])
		slack := 1.5
		if p.Name == "ultra" || p.Name == "laptop" {
			slack = 2.3
		}
		assert.InDelta(t, pub[p.Name], cEngine, slack, p.Name)
	}
	// Hit rates: 0 below one token's expert set, the ladder's 43.75% at
	// 108.98 GB, the trace's 36.24% optimistic at 8 GB.
	h, o := HitRate(10)
	assert.Zero(t, h)
	assert.InDelta(t, 0.3624, o, 1e-9)
	h, _ = HitRate(108.98)
	assert.InDelta(t, 0.4375, h, 1e-9)
	// A worked example: laptop at 3.6 GB/s and 10/4 GB/s kernels. Its
	// 3 GB trunk budget holds one ring slot (the 2.34 GB dense layer 0),
	// so nothing is pinned and the whole trunk streams.
	sp := Speeds{TrunkDiskGBps: 3.6, ExpertDiskGBps: 3.6, BF16GBps: 10, MXFP4GBps: 4}
	p := Predict(plan.Presets[1], sp)
	trunk, perToken := float64(K3.TrunkBytes), float64(K3.ExpertBytesPerToken())
	io := trunk/3.6e9 + perToken/3.6e9
	comp := (trunk+float64(K3.LMHeadBytes))/10e9 + perToken/4e9
	assert.Zero(t, p.PinnedTrunkBytes)
	assert.InDelta(t, io+comp, p.PredictedSecondsPerToken, 0.006)
	assert.Equal(t, int64(trunk+perToken), p.DiskBytesPerToken)
	// Server pins the whole trunk (110 GB > 108.81 GB).
	s := Predict(plan.Presets[4], sp)
	assert.Zero(t, s.StreamedTrunkBytesPerToken)
	assert.Less(t, s.PredictedSecondsPerToken, p.PredictedSecondsPerToken)
	// Choice by memory (plan.Resolve's auto; TestChooseNeverRefused holds
	// it to the plan check).
	for _, c := range []struct {
		avail float64
		want  string
		ok    bool
	}{{2e9, "ultra", false}, {5.5e9, "ultra", true}, {12e9, "laptop", true}, {24.6e9, "laptop", true}, {35.05e9, "laptop", true}, {35.16e9, "desktop", true}, {150e9, "server", true}, {300e9, "max", true}} {
		got, ok := Choose(plan.Memory{TotalBytes: 2 * int64(c.avail), AvailableBytes: int64(c.avail)}, sp)
		assert.Equal(t, c.want, got.Name, "Choose(%.1f GB)", c.avail/1e9)
		assert.Equal(t, c.ok, ok, "Choose(%.1f GB)", c.avail/1e9)
	}
}

// TestRunSmallRealDisk measures a real temporary directory with a tiny plan
// and checks the report's structure (not wall-time thresholds).
func TestRunSmallRealDisk(t *testing.T) {
	dir := t.TempDir()
	pl := diskPlan{probe: minProbe, phase: 300 * time.Millisecond, writeMax: 2 * time.Second}
	var phases []string
	r := measureDisk(context.Background(), dir, pl, func(p string, f float64) {
		if len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
	})
	if r.ReadGBpsQD1 == nil || r.ReadGBpsQD8 == nil || r.SeqGBps == nil || r.WriteGBps == nil {
		t.Fatalf("speeds missing: %+v", r)
	}
	for _, v := range []float64{*r.ReadGBpsQD1, *r.ReadGBpsQD8, *r.SeqGBps, *r.WriteGBps} {
		if !(v > 0) || v > 1000 {
			t.Fatalf("implausible speed %v in %+v", v, r)
		}
	}
	if r.ProbeSource != "temporary file" || r.ProbeBytes != minProbe || r.FreeBytes == 0 || r.Device == "" {
		t.Fatalf("%+v", r)
	}
	if strings.Join(phases, ",") != "write,qd1,qd8,seq" {
		t.Fatalf("phases %v", phases)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("probe file left behind: %v", ents)
	}
	t.Logf("qd1 %.2f qd8 %.2f seq %.2f write %.2f GB/s direct=%v huge=%v", *r.ReadGBpsQD1, *r.ReadGBpsQD8, *r.SeqGBps, *r.WriteGBps, r.Direct, r.HugePages)

	// Existing data is read in place, and nothing is written.
	os.WriteFile(filepath.Join(dir, "blob"), make([]byte, 3*ExpertBlock), 0o644)
	r = measureDisk(context.Background(), dir, diskPlan{probe: 2 * ExpertBlock, phase: 100 * time.Millisecond}, func(string, float64) {})
	if r.ProbeSource != "existing files" || r.WriteGBps != nil || r.ReadGBpsQD1 == nil {
		t.Fatalf("existing data: %+v", r)
	}
	// A missing directory is a note, not a failure.
	r = measureDisk(context.Background(), filepath.Join(dir, "nope"), pl, func(string, float64) {})
	if r.ReadGBpsQD1 != nil || len(r.Notes) == 0 {
		t.Fatalf("missing dir: %+v", r)
	}
}

func TestRunReportJSON(t *testing.T) {
	root := fstest.MapFS{
		"proc/cpuinfo":                    {Data: cpuinfo2x2(t)},
		"proc/self/cgroup":                {Data: []byte("0::/k3\n")},
		"sys/fs/cgroup/k3/memory.max":     {Data: []byte("6000000000\n")},
		"sys/fs/cgroup/k3/memory.current": {Data: []byte("0\n")},
	}
	dir := t.TempDir()
	var steps []string
	r, err := Run(context.Background(), Options{Dirs: []string{dir, dir}, Root: root, Memory: fakeMem{64e9, 60e9}, SkipDisk: true, SkipCompute: true,
		Progress: func(p Progress) { steps = append(steps, p.Step) }})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"cpu", "memory", "disks", "preset", "can_run", "next_command"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("JSON lacks %q: %s", k, b)
		}
	}
	mem := m["memory"].(map[string]any)
	if mem["cgroup_limit_bytes"].(float64) != 6e9 || mem["available_bytes"].(float64) != 6e9 {
		t.Fatalf("memory %v", mem)
	}
	cpu := m["cpu"].(map[string]any)
	if cpu["model"] != "Test CPU 9000" || cpu["physical_cores"].(float64) != 2 || cpu["logical_cores"].(float64) != 4 {
		t.Fatalf("cpu %v", cpu)
	}
	disks := m["disks"].([]any)
	d0 := disks[0].(map[string]any)
	for _, k := range []string{"path", "free_bytes", "read_gbps_qd1", "read_gbps_qd8", "seq_gbps"} {
		if _, ok := d0[k]; !ok {
			t.Fatalf("disk lacks %q", k)
		}
	}
	if d0["read_gbps_qd1"] != nil || disks[1].(map[string]any)["same_device_as"] != d0["path"] {
		t.Fatalf("disks %v", disks)
	}
	pr := m["preset"].(map[string]any)
	for _, k := range []string{"name", "trunk_gb", "cache_gb", "predicted_seconds_per_token", "predicted_peak_rss_bytes"} {
		if _, ok := pr[k]; !ok {
			t.Fatalf("preset lacks %q", k)
		}
	}
	// 6 GB cgroup -> ultra (laptop's 9.6 GB plan does not fit).
	if r.Preset.Name != "ultra" {
		t.Fatalf("preset %s", r.Preset.Name)
	}
	// A temp dir cannot hold 1.56 TB: cannot run, with a reason and exit-worthy verdict.
	if r.CanRun || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "room for the checkpoint") {
		t.Fatalf("verdict %v %v", r.CanRun, r.Problems)
	}
	if steps[0] != "system" || steps[len(steps)-1] != "done" {
		t.Fatalf("progress steps %v", steps)
	}

	// Too little memory: cannot run, no next command.
	r, _ = Run(context.Background(), Options{Dirs: []string{dir}, Root: fstest.MapFS{}, Memory: fakeMem{4e9, 2e9}, SkipDisk: true, SkipCompute: true})
	if r.CanRun || !strings.Contains(strings.Join(r.Problems, " "), "ultra") || r.NextCommand != "" {
		t.Fatalf("2 GB: %+v", r.Problems)
	}
}

// TestDecideWithModelAndSpace drives the decision on a synthetic report:
// enough space -> download next; a complete model -> verify next.
func TestDecideWithModelAndSpace(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	r := &Report{Memory: MemoryInfo{AvailableBytes: 40e9}, Compute: defaultCompute(8),
		Disks: []DiskResult{
			{Path: "/slow", Device: "8:0", FreeBytes: 2e12, ReadGBpsQD1: v(0.5), ReadGBpsQD8: v(0.55), SeqGBps: v(0.55)},
			{Path: "/fast", Device: "259:0", FreeBytes: 200e9, ReadGBpsQD1: v(3), ReadGBpsQD8: v(3.5), SeqGBps: v(3.6)},
		}}
	decide(r)
	if !r.CanRun || r.Preset.Name != "desktop" || r.NextCommand != "k3 download /slow/Kimi-K3" || r.TrunkDir != "/fast/k3trunk" {
		t.Fatalf("%+v", r)
	}
	if !strings.Contains(strings.Join(r.Then, "\n"), "--preset desktop") {
		t.Fatalf("then %v", r.Then)
	}
	r.Disks[0].ModelComplete, r.Disks[0].ModelBytes = true, 1560936091448
	r.Problems, r.Then = nil, nil
	decide(r)
	if r.NextCommand != "k3 verify /slow --sha256" {
		t.Fatalf("complete model: %q", r.NextCommand)
	}
}

// cpuinfo2x2 is /proc/cpuinfo of a machine with 2 physical cores of 2
// threads each.
func cpuinfo2x2(t *testing.T) []byte {
	b, err := os.ReadFile(fixture.Path("machine", "cpuinfo-2x2"))
	require.NoError(t, err)
	return b
}

// TestFloorTargets: k3 doctor's plan of the released model for a
// 4K-position context at laptop is at most 8.7 GB (the C engine measured
// 8.24-8.73 GB there): at the floor the embedding rows are read from the
// packed trunk when a token needs them (plan.StreamsEmbedding) and lm_head
// stays resident. With the embedding resident the same plan is 2.35 GB
// more, above the target.
//
// Ultra was 4.21 GB (ring 2.50, spec record 0.18, prompt chunk 0.20,
// process base 0.30). Its four levers: the ring sized to the largest layer
// (2.34 GB; the same layers read ahead), no speculation (the record of one
// position a plain pass keeps at the floor), the routed experts' gather in
// one scratch and the dense down projection widened 8 positions at a time
// (0.09 GB), the CLI's measured base (the runtime, the binary and the
// tokenizer, 62 MB) with the checkpoint's tensor index counted as a run
// holds it (0.014 GB measured: the routed experts' places, the trunk's
// entries; the full index, 0.16 GB, is forgotten once the experts are
// located). That made ultra 3.55 GB. The fifth lever meets the 3.5 GB
// target: the expert cache planned as the reads in flight need
// (plan.MinExpertSlots: 9 slots, 0.16 GB, not the C engine's top-k + 1 =
// 17, 0.30 GB; at ultra its hit rate is near zero either way, and the
// engine runs a layer's 16 experts through the 9 slots a slot at a time,
// ExpertStore.Each): 3.40 GB (docs/MEMORY.md).
func TestFloorTargets(t *testing.T) {
	laptop, _ := plan.Lookup("laptop")
	pl := K3.Plan(laptop.Budget())
	require.True(t, pl.EmbedStreamed)
	assert.LessOrEqual(t, pl.Total, int64(8.7e9), "laptop: %s", pl)
	assert.Equal(t, K3.GlobalBytes-K3.EmbedBytes, pl.Globals, "lm_head and the final norms resident")
	in := K3.Inputs(laptop.Budget(), PlanPositions)
	in.EmbedStreamed, in.GlobalBytes, in.TableRuns = false, K3.GlobalBytes, 3
	assert.Greater(t, plan.Make(in).Total, int64(8.7e9), "with the embedding resident")
	// above the floor the tables stay resident (desktop pins layers: speed
	// is not bound by reading the whole trunk every token there)
	desktop, _ := plan.Lookup("desktop")
	assert.False(t, K3.Plan(desktop.Budget()).EmbedStreamed)
	assert.Equal(t, K3.GlobalBytes, K3.Plan(desktop.Budget()).Globals)

	ultra, _ := plan.Lookup("ultra")
	u := K3.Plan(ultra.Budget())
	assert.Equal(t, K3.LayerBytes[0]+plan.RingSlack, u.RingBytes, "the ring holds the largest layer, not the 2.50 GB budget")
	assert.Contains(t, u.String(), "holds 2 layers in flight at 46 of the 93 streamed layers", "and reads ahead where a budget-sized ring did")
	assert.InDelta(t, 20.4e6, float64(u.Spec), 0.5e6, "no speculation: one position's record")
	assert.Less(t, u.Prefill, int64(0.09e9), "the prompt chunk")
	assert.Equal(t, int64(CLIBaselineBytes)+K3.IndexBytes(), u.Baseline)
	assert.InDelta(t, 0.014e9, float64(K3.IndexBytes()), 0.001e9, "the released checkpoint's tensor index, as a run holds it")
	assert.Equal(t, 9, u.CacheSlots, "the reads in flight (8) and the expert computing; the C engine kept top-k + 1 = 17")
	assert.Equal(t, plan.MinExpertSlots(K3.Cfg.TopK), u.CacheSlots)
	assert.InDelta(t, 0.158e9, float64(u.CacheBytes), 0.001e9, "9 slots of 17.55 MB")
	assert.LessOrEqual(t, u.Total, int64(3.5e9), "ultra: %s", u)
	assert.Greater(t, u.Total, int64(3.4e9), "ultra: %s", u)
	assert.Equal(t, u.Total-CLIBaselineBytes+AppBaselineBytes, AppBytes(u.Total), "the app's plan: its base instead of the CLI's")
}
