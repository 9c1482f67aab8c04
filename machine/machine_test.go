package machine

import (
	"io/fs"
	"k3/internal/fixture"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func tree(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for name, body := range files {
		m[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return m
}

// The fixtures of the former engine/plan memory test.
func TestReadMemoryFS(t *testing.T) {
	root := tree(map[string]string{
		"proc/meminfo":     "MemTotal:       24000000 kB\nMemFree: 1 kB\nMemAvailable:   20000000 kB\n",
		"proc/self/cgroup": "0::/user.slice/k3.scope\n",
		"sys/fs/cgroup/user.slice/k3.scope/memory.max": "max\n",
		"sys/fs/cgroup/user.slice/memory.max":          "8589934592\n",
		"sys/fs/cgroup/user.slice/memory.current":      "1073741824\n",
		"sys/kernel/mm/transparent_hugepage/enabled":   "always [madvise] never\n",
	})
	m, err := ReadMemoryFS(root)
	require.NoError(t, err)
	assert.Equal(t, Memory{TotalBytes: 24000000 * 1024, AvailableBytes: 20000000 * 1024, TransparentHugePages: "madvise",
		Cgroup: Cgroup{Version: 2, Path: "/user.slice/k3.scope", Limit: 8589934592, Usage: 1073741824, UsageKnown: true}}, m)

	// v1
	root = tree(map[string]string{
		"proc/meminfo":     "MemTotal: 100 kB\nMemAvailable: 50 kB\n",
		"proc/self/cgroup": "12:memory:/box\n",
		"sys/fs/cgroup/memory/box/memory.limit_in_bytes": "40960\n",
		"sys/fs/cgroup/memory/box/memory.usage_in_bytes": "1024\n",
	})
	m, err = ReadMemoryFS(root)
	require.NoError(t, err)
	assert.Equal(t, Cgroup{Version: 1, Path: "/box", Limit: 40960, Usage: 1024, UsageKnown: true}, m.Cgroup)
	assert.Equal(t, int64(102400), m.TotalBytes)

	_, err = ReadMemoryFS(fstest.MapFS{})
	assert.Error(t, err, "missing meminfo accepted")
	_, err = ReadMemoryFS(tree(map[string]string{"proc/meminfo": "MemTotal: 100 kB\n"}))
	assert.ErrorContains(t, err, "MemAvailable")
}

// The fixtures of the former doctor cgroup tests.
func TestCgroupV2Nested(t *testing.T) {
	fsys := tree(map[string]string{
		"proc/self/cgroup":                                  "0::/user.slice/app.scope\n",
		"sys/fs/cgroup/memory.max":                          "max\n",
		"sys/fs/cgroup/user.slice/memory.max":               "8000000000\n",
		"sys/fs/cgroup/user.slice/app.scope/memory.max":     "max\n",
		"sys/fs/cgroup/user.slice/app.scope/memory.current": "1000000000\n",
	})
	cg := cgroupOf(t, fsys)
	// no usage where the limit sits: the process's own cgroup's
	assert.Equal(t, Cgroup{Version: 2, Path: "/user.slice/app.scope", Limit: 8e9, Usage: 1e9, UsageKnown: true}, cg)

	// the level with the least headroom wins, not the smallest limit
	fsys["sys/fs/cgroup/memory.max"] = &fstest.MapFile{Data: []byte("9000000000\n")}
	fsys["sys/fs/cgroup/memory.current"] = &fstest.MapFile{Data: []byte("8500000000\n")}
	cg = cgroupOf(t, fsys)
	assert.Equal(t, int64(9e9), cg.Limit)
	assert.Equal(t, int64(8.5e9), cg.Usage)
	delete(fsys, "sys/fs/cgroup/memory.current")
	fsys["sys/fs/cgroup/memory.max"] = &fstest.MapFile{Data: []byte("max\n")}

	// unlimited
	fsys["sys/fs/cgroup/user.slice/memory.max"] = &fstest.MapFile{Data: []byte("max\n")}
	cg = cgroupOf(t, fsys)
	assert.Equal(t, 2, cg.Version)
	assert.Zero(t, cg.Limit)

	// garbled: fail closed
	fsys["sys/fs/cgroup/user.slice/memory.max"] = &fstest.MapFile{Data: []byte("lots\n")}
	_, err := ReadCgroup(fsys)
	assert.ErrorContains(t, err, `"lots", not a number`)
}

func TestCgroupV1(t *testing.T) {
	fsys := tree(map[string]string{
		"proc/self/cgroup":                                      "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
		"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "4294967296\n",
		"sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes": "294967296\n",
	})
	cg := cgroupOf(t, fsys)
	assert.Equal(t, Cgroup{Version: 1, Path: "/docker/abc", Limit: 4294967296, Usage: 294967296, UsageKnown: true}, cg)

	// Namespaced: the path from /proc does not exist under the mount; the
	// mount's own files apply.
	fsys = tree(map[string]string{
		"proc/self/cgroup":                           "4:memory:/process_api/xyz\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "2000000000\n",
		"sys/fs/cgroup/memory/memory.usage_in_bytes": "500000000\n",
	})
	cg = cgroupOf(t, fsys)
	assert.Equal(t, int64(2e9), cg.Limit)
	assert.Equal(t, int64(5e8), cg.Usage)

	// No cgroup at all.
	cg = cgroupOf(t, fstest.MapFS{})
	assert.Equal(t, Cgroup{}, cg)
}

func TestReadCPUFS(t *testing.T) {
	c := ReadCPUFS(tree(map[string]string{"proc/cpuinfo": cpuinfo2x2(t)}))
	assert.Equal(t, "Test CPU 9000", c.Model)
	assert.Equal(t, 4, c.LogicalCores)
	assert.Equal(t, 2, c.PhysicalCores)

	// ARM style: no core ids in cpuinfo, topology in sysfs.
	arm := tree(map[string]string{"proc/cpuinfo": "processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\n\nprocessor\t: 2\n"})
	for i, core := range []string{"0", "1", "1"} {
		d := "sys/devices/system/cpu/cpu" + string(rune('0'+i)) + "/topology/"
		arm[d+"core_id"] = &fstest.MapFile{Data: []byte(core + "\n")}
		arm[d+"physical_package_id"] = &fstest.MapFile{Data: []byte("0\n")}
	}
	c = ReadCPUFS(arm)
	assert.Equal(t, 3, c.LogicalCores)
	assert.Equal(t, 2, c.PhysicalCores)
	assert.True(t, strings.HasPrefix(c.Model, "unknown"), c.Model)

	// no cpuinfo: what Go sees
	c = ReadCPUFS(fstest.MapFS{})
	assert.Equal(t, runtime.NumCPU(), c.LogicalCores)
	assert.Equal(t, c.LogicalCores, c.PhysicalCores)
}

func TestThisMachine(t *testing.T) {
	c := ReadCPU()
	assert.GreaterOrEqual(t, c.PhysicalCores, 1)
	assert.LessOrEqual(t, c.PhysicalCores, c.LogicalCores)
	assert.Equal(t, c.PhysicalCores, PhysicalCores())
	assert.GreaterOrEqual(t, DefaultThreads(), 1)
	assert.LessOrEqual(t, DefaultThreads(), runtime.GOMAXPROCS(0))

	m, err := ReadMemory()
	if err != nil {
		t.Skip("memory not readable here:", err)
	}
	assert.Positive(t, m.TotalBytes)
	assert.Positive(t, m.AvailableBytes)
	assert.LessOrEqual(t, m.AvailableBytes, m.TotalBytes)
	rss := RSS()
	assert.Positive(t, rss)
	if runtime.GOOS == "linux" || runtime.GOOS == "darwin" {
		assert.GreaterOrEqual(t, PeakRSS(), rss/2) // sampled at different moments
	}
}

// cpuinfo2x2 is /proc/cpuinfo of a machine with 2 physical cores of 2
// threads each (testdata/machine/cpuinfo-2x2).
func cpuinfo2x2(t *testing.T) string {
	b, err := os.ReadFile(fixture.Path("machine", "cpuinfo-2x2"))
	require.NoError(t, err)
	return string(b)
}

// cgroupOf reads the cgroup of fsys, which must not fail.
func cgroupOf(t *testing.T, fsys fs.FS) Cgroup {
	t.Helper()
	cg, err := ReadCgroup(fsys)
	require.NoError(t, err)
	return cg
}
