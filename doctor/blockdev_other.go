//go:build !linux

package doctor

import "k3/storage/direct"

func openBlockDevice(dev string, pl diskPlan) (*direct.File, int64, bool) { return nil, 0, false }
