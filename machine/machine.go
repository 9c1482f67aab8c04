// Package machine is the one place k3 reads the machine it runs on: memory
// (with the process's cgroup limit), this process's resident set, and the
// processor (model, physical and logical cores, SIMD features).
//
// It imports nothing of k3, so any package may use it. Linux is read
// directly from /proc and /sys (the parsers take an fs.FS rooted at "/", so
// tests pass a fake tree); other systems use gopsutil where it answers, and
// say "not available on this system" (ErrNotAvailable) where nothing does,
// rather than guess.
package machine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// ErrNotAvailable is returned for a fact this system does not let k3 read.
var ErrNotAvailable = errors.New("not available on this system")

// Memory is what the machine has and what this process may use of it.
type Memory struct {
	TotalBytes     int64 // installed memory (MemTotal)
	AvailableBytes int64 // what new allocations can get without swapping (MemAvailable)
	Cgroup         Cgroup
	// TransparentHugePages is the kernel's THP mode (always, madvise,
	// never); "" when unknown.
	TransparentHugePages string
}

// Cgroup is the memory limit of the process's cgroup.
type Cgroup struct {
	Version int    // 1 or 2 when a memory cgroup is visible, else 0
	Path    string // the process's cgroup, as /proc/self/cgroup names it
	// Limit is the limit that leaves the least headroom (limit - usage) on
	// the way from the process's cgroup up to the root; 0: no limit.
	Limit int64
	// Usage is the memory charged where Limit is set (the process's own
	// cgroup's when that level's usage cannot be read); valid when
	// UsageKnown.
	Usage      int64
	UsageKnown bool
}

// ReadMemory reads this machine's memory. On Linux a cgroup limit that is
// present but unreadable is an error (the Memory returned then has the
// machine's figures and no limit: a caller must not take it as unlimited).
func ReadMemory() (Memory, error) { return readMemory() }

// ReadMemoryFS reads proc/meminfo, the cgroup limits (ReadCgroup) and the
// THP mode from a Linux tree rooted at "/".
func ReadMemoryFS(root fs.FS) (Memory, error) {
	var m Memory
	raw, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return m, fmt.Errorf("memory: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 2 && f[2] == "kB" {
			v *= 1024
		}
		switch f[0] {
		case "MemTotal:":
			m.TotalBytes = v
		case "MemAvailable:":
			m.AvailableBytes = v
		}
	}
	if m.TotalBytes == 0 || m.AvailableBytes == 0 {
		return m, errors.New("memory: /proc/meminfo has no MemTotal/MemAvailable")
	}
	m.TransparentHugePages = ReadTHP(root)
	m.Cgroup, err = ReadCgroup(root)
	return m, err
}

// ReadTHP returns the transparent huge page mode from
// sys/kernel/mm/transparent_hugepage/enabled ("" when unknown).
func ReadTHP(root fs.FS) string {
	b, err := fs.ReadFile(root, "sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.Index(s, "["); i >= 0 {
		if j := strings.Index(s[i:], "]"); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return ""
}

// unlimited treats cgroup v1's "no limit" (a page-rounded 2^63-1) and any
// absurd value as no limit.
const unlimited = int64(1) << 60

// ReadCgroup finds the memory limit of this process's cgroup for cgroup v1
// (memory.limit_in_bytes, memory.usage_in_bytes) or v2 (memory.max,
// memory.current), walking from the process's cgroup up to the root and
// keeping the level with the least headroom. root is the tree rooted at
// "/". Version 0 means no memory cgroup is visible. A limit file that
// exists but does not parse is an error: fail closed, the caller must not
// take the memory as unlimited.
func ReadCgroup(root fs.FS) (Cgroup, error) {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return Cgroup{}, nil
	}
	v2path, v1path, hasV1 := procCgroup(string(b))
	var tries []cgroupLayout
	if hasV1 {
		tries = append(tries, cgroupLayout{1, "sys/fs/cgroup/memory", v1path, "memory.limit_in_bytes", "memory.usage_in_bytes", ""})
	}
	if v2path != "" {
		tries = append(tries, cgroupLayout{2, "sys/fs/cgroup", v2path, "memory.max", "memory.current", "max"},
			cgroupLayout{2, "sys/fs/cgroup/unified", v2path, "memory.max", "memory.current", "max"})
	}
	for _, l := range tries {
		if cg, found, err := l.read(root); err != nil || found {
			return cg, err
		}
	}
	return Cgroup{}, nil
}

// procCgroup reads /proc/self/cgroup: the cgroup v2 path, and the v1
// memory controller's path when there is one.
func procCgroup(s string) (v2path, v1path string, hasV1 bool) {
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				v1path, hasV1 = parts[2], true
			}
		}
	}
	return v2path, v1path, hasV1
}

// cgroupLayout is where one cgroup version keeps the memory limit and
// usage of the cgroup cg.
type cgroupLayout struct {
	version          int
	mount, cg        string
	limitF, usageF   string
	unlimitedKeyword string
}

// read finds the tightest memory limit from the process's cgroup up to the
// mount; with a cgroup namespace the path may not exist under the mount,
// then only the mount's own files describe us. found is false when no
// level has a limit file.
func (l cgroupLayout) read(root fs.FS) (cg Cgroup, found bool, err error) {
	var dirs []string
	for p := path.Clean("/" + l.cg); ; p = path.Dir(p) {
		dirs = append(dirs, path.Join(l.mount, p))
		if p == "/" {
			break
		}
	}
	cg = Cgroup{Version: l.version, Path: l.cg}
	var head int64
	for _, d := range dirs {
		raw, err := fs.ReadFile(root, d+"/"+l.limitF)
		if err != nil {
			continue
		}
		found = true
		s := strings.TrimSpace(string(raw))
		if s != "" && s == l.unlimitedKeyword {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return Cgroup{Version: l.version, Path: l.cg}, true, fmt.Errorf("/%s/%s holds %q, not a number", d, l.limitF, s)
		}
		if n >= unlimited {
			continue
		}
		u, ok := l.usage(root, d)
		if !ok {
			// the process's own cgroup is charged to every level above it
			u, ok = l.usage(root, dirs[0])
		}
		h := n
		if ok {
			h -= u
		}
		if cg.Limit == 0 || h < head {
			cg.Limit, cg.Usage, cg.UsageKnown, head = n, u, ok, h
		}
	}
	return cg, found, nil
}

// usage is the memory usage recorded in the cgroup directory d.
func (l cgroupLayout) usage(root fs.FS, d string) (int64, bool) {
	raw, err := fs.ReadFile(root, d+"/"+l.usageF)
	if err != nil {
		return 0, false
	}
	u, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return u, err == nil
}

// CPU describes the processor.
type CPU struct {
	Model         string
	PhysicalCores int
	LogicalCores  int
	Features      []string // SIMD features this process may use (golang.org/x/sys/cpu)
}

var cpuOnce = sync.OnceValue(readCPU)

// ReadCPU describes this machine's processor (read once per process).
func ReadCPU() CPU {
	c := cpuOnce()
	c.Features = append([]string(nil), c.Features...)
	return c
}

// PhysicalCores is the number of physical cores (at least 1).
func PhysicalCores() int { return cpuOnce().PhysicalCores }

// DefaultThreads is the worker count k3 uses when none is given: one per
// physical core, at most GOMAXPROCS (which follows the process's CPU
// affinity and quota).
func DefaultThreads() int { return max(1, min(PhysicalCores(), runtime.GOMAXPROCS(0))) }

// ReadCPUFS parses proc/cpuinfo (and the sysfs topology when cpuinfo has no
// core ids) from a Linux tree rooted at "/". Without cpuinfo it reports the
// logical CPUs Go sees as cores and the architecture as the model.
func ReadCPUFS(root fs.FS) CPU {
	info := CPU{Features: Features()}
	b, err := fs.ReadFile(root, "proc/cpuinfo")
	if err != nil {
		info.LogicalCores = runtime.NumCPU()
		info.PhysicalCores = info.LogicalCores
		info.Model = runtime.GOARCH
		return info
	}
	cores := map[string]bool{}
	var phys, core string
	logical := 0
	flush := func() {
		if core != "" {
			cores[phys+"/"+core] = true
		}
		phys, core = "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				flush()
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			logical++
		case "model name", "Model", "cpu model", "Processor":
			if _, err := strconv.Atoi(v); info.Model == "" && v != "" && err != nil {
				info.Model = v
			}
		case "physical id":
			phys = v
		case "core id":
			core = v
		}
	}
	flush()
	if logical == 0 {
		logical = runtime.NumCPU()
	}
	info.LogicalCores = logical
	info.PhysicalCores = len(cores)
	if info.PhysicalCores == 0 {
		// No core ids (many ARM kernels): count distinct sysfs topology pairs.
		for i := 0; i < logical; i++ {
			dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology", i)
			c, err1 := fs.ReadFile(root, dir+"/core_id")
			p, err2 := fs.ReadFile(root, dir+"/physical_package_id")
			if err1 != nil || err2 != nil {
				cores = nil
				break
			}
			cores[strings.TrimSpace(string(p))+"/"+strings.TrimSpace(string(c))] = true
		}
		info.PhysicalCores = len(cores)
	}
	if info.PhysicalCores == 0 || info.PhysicalCores > logical {
		info.PhysicalCores = logical
	}
	if info.Model == "" {
		info.Model = "unknown " + runtime.GOARCH
	}
	return info
}
