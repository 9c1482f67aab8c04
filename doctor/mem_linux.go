package doctor

import (
	"context"

	"github.com/shirou/gopsutil/v4/mem"
)

// gopsutilMemory is the default MemorySource: gopsutil reads MemTotal and
// MemAvailable from /proc/meminfo.
type gopsutilMemory struct{}

func (gopsutilMemory) Memory(ctx context.Context) (uint64, uint64, error) {
	v, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return 0, 0, err
	}
	return v.Total, v.Available, nil
}
