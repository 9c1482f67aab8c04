//go:build !linux

package machine

import (
	"fmt"
	"os"
	"runtime"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/process"
)

// readMemory asks gopsutil (the system's own calls). No cgroup here.
func readMemory() (Memory, error) {
	v, err := mem.VirtualMemory()
	if err != nil || v.Total == 0 {
		return Memory{}, fmt.Errorf("memory: %w (%v)", ErrNotAvailable, err)
	}
	return Memory{TotalBytes: int64(v.Total), AvailableBytes: int64(v.Available)}, nil
}

func readCPU() CPU {
	c := CPU{Features: Features(), LogicalCores: runtime.NumCPU(), Model: "unknown " + runtime.GOARCH}
	if n, err := cpu.Counts(false); err == nil && n > 0 {
		c.PhysicalCores = n
	}
	if c.PhysicalCores == 0 || c.PhysicalCores > c.LogicalCores {
		c.PhysicalCores = c.LogicalCores
	}
	if info, err := cpu.Info(); err == nil && len(info) > 0 && info[0].ModelName != "" {
		c.Model = info[0].ModelName
	}
	return c
}

// RSS is this process's resident set size now, 0 if unknown.
func RSS() int64 {
	p, err := process.NewProcess(int32(os.Getpid()))
	if err != nil {
		return 0
	}
	m, err := p.MemoryInfo()
	if err != nil {
		return 0
	}
	return int64(m.RSS)
}
