package doctor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/cpu"

	"k3/storage/units"
)

// CPUInfo describes the processor.
type CPUInfo struct {
	Model         string   `json:"model"`
	PhysicalCores int      `json:"physical_cores"`
	LogicalCores  int      `json:"logical_cores"`
	Features      []string `json:"features"` // SIMD features the kernels can use
}

// MemoryInfo describes memory, with cgroup limits applied.
type MemoryInfo struct {
	TotalBytes uint64 `json:"total_bytes"`
	// AvailableBytes is what a new process can use: MemAvailable, lowered to
	// the cgroup's headroom (limit - usage) when a cgroup limit is tighter.
	AvailableBytes       uint64  `json:"available_bytes"`
	MemAvailableBytes    uint64  `json:"meminfo_available_bytes"`
	CgroupLimitBytes     *uint64 `json:"cgroup_limit_bytes"` // nil: no limit
	CgroupUsageBytes     *uint64 `json:"cgroup_usage_bytes,omitempty"`
	CgroupVersion        int     `json:"cgroup_version,omitempty"` // 1 or 2 when a memory cgroup was found
	CgroupPath           string  `json:"cgroup_path,omitempty"`
	TransparentHugePages string  `json:"transparent_hugepages,omitempty"` // always / madvise / never
}

// MemorySource reports total and available memory. The default uses
// gopsutil (MemTotal/MemAvailable on Linux, the native calls elsewhere);
// tests inject fakes.
type MemorySource interface {
	Memory(ctx context.Context) (total, available uint64, err error)
}

// cpuFeatures lists the SIMD features relevant to the kernels, from
// golang.org/x/sys/cpu (what this process may actually use).
func cpuFeatures() []string {
	var f []string
	add := func(ok bool, name string) {
		if ok {
			f = append(f, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := cpu.X86
		add(x.HasSSE42, "sse4.2")
		add(x.HasAVX, "avx")
		add(x.HasAVX2, "avx2")
		add(x.HasFMA, "fma")
		add(x.HasBMI2, "bmi2")
		add(x.HasAVX512F, "avx512f")
		add(x.HasAVX512BW, "avx512bw")
		add(x.HasAVX512VL, "avx512vl")
		add(x.HasAVX512DQ, "avx512dq")
		add(x.HasAVX512VNNI, "avx512vnni")
		add(x.HasAVX512BF16, "avx512bf16")
		add(x.HasAVX512VBMI, "avx512vbmi")
		add(x.HasAVXVNNI, "avxvnni")
	case "arm64":
		a := cpu.ARM64
		add(a.HasASIMD, "asimd")
		add(a.HasFPHP, "fp16")
		add(a.HasASIMDDP, "asimddp")
		add(a.HasSVE, "sve")
		add(a.HasSVE2, "sve2")
	}
	return f
}

// readCPU parses proc/cpuinfo (and sysfs topology when cpuinfo has no core
// ids) from fsys, which is rooted at "/".
func readCPU(fsys fs.FS) CPUInfo {
	info := CPUInfo{Features: cpuFeatures()}
	b, err := fs.ReadFile(fsys, "proc/cpuinfo")
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
			if info.Model == "" && v != "" && !isNumber(v) {
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
			c, err1 := fs.ReadFile(fsys, dir+"/core_id")
			p, err2 := fs.ReadFile(fsys, dir+"/physical_package_id")
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

func isNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// unlimited treats cgroup v1's "no limit" (a page-rounded 2^63-1) and any
// absurd value as no limit.
const unlimited = uint64(1) << 60

// readCgroup finds the tightest memory limit on the path from this
// process's cgroup to the root, for cgroup v2 (memory.max,
// memory.current) or v1 (memory.limit_in_bytes, memory.usage_in_bytes).
// fsys is rooted at "/". It returns version 0 when no memory cgroup is
// visible. A file that exists but does not parse is an error (fail closed:
// the caller treats the limit as unknown and says so).
func readCgroup(fsys fs.FS) (limit, usage *uint64, version int, cgPath string, err error) {
	b, rerr := fs.ReadFile(fsys, "proc/self/cgroup")
	if rerr != nil {
		return nil, nil, 0, "", nil
	}
	var v2path, v1path string
	hasV1 := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
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
	type layout struct {
		version          int
		root, cg         string
		limitF, usageF   string
		unlimitedKeyword string
	}
	var tries []layout
	if hasV1 {
		tries = append(tries, layout{1, "sys/fs/cgroup/memory", v1path, "memory.limit_in_bytes", "memory.usage_in_bytes", ""})
	}
	if v2path != "" {
		tries = append(tries, layout{2, "sys/fs/cgroup", v2path, "memory.max", "memory.current", "max"},
			layout{2, "sys/fs/cgroup/unified", v2path, "memory.max", "memory.current", "max"})
	}
	for _, l := range tries {
		// Walk from the process's cgroup up to the root; with a cgroup
		// namespace the path may not exist under the mount, then only the
		// mount's own files describe us.
		dirs := []string{}
		p := path.Clean("/" + l.cg)
		for {
			dirs = append(dirs, path.Join(l.root, p))
			if p == "/" {
				break
			}
			p = path.Dir(p)
		}
		found := false
		var lim, use *uint64
		for i, d := range dirs {
			raw, e := fs.ReadFile(fsys, d+"/"+l.limitF)
			if e != nil {
				continue
			}
			found = true
			s := strings.TrimSpace(string(raw))
			if s == l.unlimitedKeyword && s != "" {
				continue
			}
			n, perr := strconv.ParseUint(s, 10, 64)
			if perr != nil {
				return nil, nil, l.version, l.cg, fmt.Errorf("%s/%s holds %q, not a number", "/"+d, l.limitF, s)
			}
			if n >= unlimited {
				continue
			}
			if lim == nil || n < *lim {
				nn := n
				lim = &nn
			}
			if i == 0 || use == nil {
				if ur, e := fs.ReadFile(fsys, d+"/"+l.usageF); e == nil {
					if u, e := strconv.ParseUint(strings.TrimSpace(string(ur)), 10, 64); e == nil && (use == nil || i == 0) {
						uu := u
						use = &uu
					}
				}
			}
		}
		if found {
			if lim != nil && use == nil {
				// usage of the process's own cgroup, if the limit sat higher up
				if ur, e := fs.ReadFile(fsys, dirs[0]+"/"+l.usageF); e == nil {
					if u, e := strconv.ParseUint(strings.TrimSpace(string(ur)), 10, 64); e == nil {
						use = &u
					}
				}
			}
			return lim, use, l.version, l.cg, nil
		}
	}
	return nil, nil, 0, "", nil
}

// readMemory combines the MemorySource with the cgroup limits.
func readMemory(ctx context.Context, src MemorySource, fsys fs.FS) (MemoryInfo, []string) {
	var notes []string
	var m MemoryInfo
	total, avail, err := src.Memory(ctx)
	if err != nil {
		notes = append(notes, "memory: could not read total/available memory: "+err.Error())
	}
	m.TotalBytes, m.MemAvailableBytes, m.AvailableBytes = total, avail, avail
	lim, use, ver, cg, err := readCgroup(fsys)
	if err != nil {
		notes = append(notes, "memory: cgroup limit unreadable ("+err.Error()+"); treating available memory as 0 to stay safe")
		m.AvailableBytes = 0
		return m, notes
	}
	m.CgroupVersion, m.CgroupLimitBytes, m.CgroupUsageBytes = ver, lim, use
	if ver != 0 {
		m.CgroupPath = cg
	}
	if lim != nil {
		head := *lim
		if use != nil {
			if *use >= head {
				head = 0
			} else {
				head -= *use
			}
		}
		if head < m.AvailableBytes || m.AvailableBytes == 0 {
			m.AvailableBytes = head
			notes = append(notes, fmt.Sprintf("memory: the cgroup limit (%s, v%d) is tighter than the machine's free memory", units.Bytes(int64(*lim)), ver))
		}
		if *lim < m.TotalBytes || m.TotalBytes == 0 {
			// what this process can ever have
			notes = append(notes, fmt.Sprintf("memory: this process may use at most %s (cgroup), of %s installed", units.Bytes(int64(*lim)), units.Bytes(int64(m.TotalBytes))))
		}
	}
	if b, err := fs.ReadFile(fsys, "sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		s := string(b)
		if i := strings.Index(s, "["); i >= 0 {
			if j := strings.Index(s[i:], "]"); j > 0 {
				m.TransparentHugePages = s[i+1 : i+j]
			}
		}
		if m.TransparentHugePages == "never" {
			notes = append(notes, "memory: transparent huge pages are off (never): O_DIRECT reads will run at about half speed; set /sys/kernel/mm/transparent_hugepage/enabled to madvise")
		}
	}
	return m, notes
}
