package doctor

import (
	"context"
	"fmt"
	"io/fs"

	"k3/engine/plan"
	"k3/machine"
	"k3/storage/units"
)

// CPUInfo describes the processor.
type CPUInfo struct {
	Model         string   `json:"model"`
	PhysicalCores int      `json:"physical_cores"`
	LogicalCores  int      `json:"logical_cores"`
	Features      []string `json:"features"` // SIMD features the kernels can use
}

func cpuInfo(c machine.CPU) CPUInfo {
	return CPUInfo{Model: c.Model, PhysicalCores: c.PhysicalCores, LogicalCores: c.LogicalCores, Features: c.Features}
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

// Plan is the memory in the terms of a memory plan: what plan.Check and
// plan.Resolve test a plan against. The cgroup is already applied to
// AvailableBytes, so a cgroup limit that could not be read (AvailableBytes
// 0) leaves nothing usable.
func (m MemoryInfo) Plan() plan.Memory {
	return plan.Memory{TotalBytes: int64(m.TotalBytes), AvailableBytes: int64(m.AvailableBytes)}
}

// PlanMemory converts what machine read into the plan's terms.
func PlanMemory(m machine.Memory) plan.Memory {
	p := plan.Memory{TotalBytes: m.TotalBytes, AvailableBytes: m.AvailableBytes, CgroupLimit: m.Cgroup.Limit}
	if m.Cgroup.UsageKnown {
		p.CgroupUsage = m.Cgroup.Usage
	}
	return p
}

// ReadMemory reads this machine's memory (machine) for a memory plan.
func ReadMemory() (plan.Memory, error) {
	m, err := machine.ReadMemory()
	return PlanMemory(m), err
}

// MemorySource reports total and available memory. The default is
// machine (MemTotal/MemAvailable on Linux, gopsutil elsewhere);
// tests inject fakes.
type MemorySource interface {
	Memory(ctx context.Context) (total, available uint64, err error)
}

// machineMemory is the default MemorySource.
type machineMemory struct{}

func (machineMemory) Memory(context.Context) (uint64, uint64, error) {
	m, err := machine.ReadMemory()
	if m.TotalBytes == 0 {
		return 0, 0, err
	}
	return uint64(m.TotalBytes), uint64(m.AvailableBytes), nil
}

// readMemory combines the MemorySource with the cgroup limits and the THP
// mode read from fsys (rooted at "/").
func readMemory(ctx context.Context, src MemorySource, fsys fs.FS) (MemoryInfo, []string) {
	var notes []string
	var m MemoryInfo
	total, avail, err := src.Memory(ctx)
	if err != nil {
		notes = append(notes, "memory: could not read total/available memory: "+err.Error())
	}
	m.TotalBytes, m.MemAvailableBytes, m.AvailableBytes = total, avail, avail
	cg, err := machine.ReadCgroup(fsys)
	if err != nil {
		notes = append(notes, "memory: cgroup limit unreadable ("+err.Error()+"); treating available memory as 0 to stay safe")
		m.AvailableBytes = 0
		return m, notes
	}
	m.CgroupVersion = cg.Version
	if cg.Version != 0 {
		m.CgroupPath = cg.Path
	}
	if cg.UsageKnown {
		u := uint64(cg.Usage)
		m.CgroupUsageBytes = &u
	}
	if cg.Limit > 0 {
		lim := uint64(cg.Limit)
		m.CgroupLimitBytes = &lim
		pm := PlanMemory(machine.Memory{AvailableBytes: int64(avail), Cgroup: cg})
		if avail == 0 {
			pm.AvailableBytes = cg.Limit // unknown: the cgroup's headroom is all we know
		}
		if head := uint64(pm.Usable()); head < m.AvailableBytes || m.AvailableBytes == 0 {
			m.AvailableBytes = head
			notes = append(notes, fmt.Sprintf("memory: the cgroup limit (%s, v%d) is tighter than the machine's free memory", units.Bytes(int64(lim)), cg.Version))
		}
		if lim < m.TotalBytes || m.TotalBytes == 0 {
			// what this process can ever have
			notes = append(notes, fmt.Sprintf("memory: this process may use at most %s (cgroup), of %s installed", units.Bytes(int64(lim)), units.Bytes(int64(m.TotalBytes))))
		}
	}
	m.TransparentHugePages = machine.ReadTHP(fsys)
	if m.TransparentHugePages == "never" {
		notes = append(notes, "memory: transparent huge pages are off (never): O_DIRECT reads will run at about half speed; set /sys/kernel/mm/transparent_hugepage/enabled to madvise")
	}
	return m, notes
}
