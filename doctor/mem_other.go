//go:build !linux

package doctor

import (
	"context"
	"errors"
)

// gopsutilMemory: on this system gopsutil would need modules (purego, wmi)
// that are not in go.sum yet, so memory is reported unknown and the doctor
// says so instead of guessing.
type gopsutilMemory struct{}

func (gopsutilMemory) Memory(ctx context.Context) (uint64, uint64, error) {
	return 0, 0, errors.New("reading memory is not implemented on this system yet")
}
