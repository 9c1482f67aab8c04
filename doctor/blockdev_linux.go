package doctor

import (
	"os"
	"strconv"
	"strings"

	"k3/storage/direct"
)

// openBlockDevice opens the block device "major:minor" read-only with
// O_DIRECT, if the plan allows it and this process may read it. The size
// comes from sysfs (stat reports 0 for block devices).
func openBlockDevice(dev string, pl diskPlan) (*direct.File, int64, bool) {
	if !pl.device || dev == "" || strings.HasPrefix(dev, "0:") {
		return nil, 0, false
	}
	ue, err := os.ReadFile("/sys/dev/block/" + dev + "/uevent")
	if err != nil {
		return nil, 0, false
	}
	name := ""
	for _, l := range strings.Split(string(ue), "\n") {
		if v, ok := strings.CutPrefix(l, "DEVNAME="); ok {
			name = v
		}
	}
	sz, err := os.ReadFile("/sys/dev/block/" + dev + "/size")
	if name == "" || err != nil {
		return nil, 0, false
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(sz)), 10, 64)
	if err != nil || sectors*512 < 4*ExpertBlock {
		return nil, 0, false
	}
	f, err := direct.Open("/dev/" + name)
	if err != nil {
		return nil, 0, false
	}
	if !f.Direct() {
		f.Close()
		return nil, 0, false
	}
	return f, direct.AlignDown(sectors * 512), true
}
