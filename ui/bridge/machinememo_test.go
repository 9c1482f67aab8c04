package bridge

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/doctor"
)

// The measurement covers the folders it measured and any folder on their
// disks; a folder on another disk (or one whose disk is unknown) needs a
// new one. It is kept for the next start, with its time.
func TestMachineMemoCoversTheDisksItMeasured(t *testing.T) {
	data := t.TempDir()
	m := NewMachineMemo(data)
	disks := map[string]string{"/home/me": "259:1", "/home/me/models/K3": "259:1", "/mnt/nvme2/K3": "259:7", "/net/K3": ""}
	m.deviceOf = func(d string) string { return disks[d] }
	free := int64(900e9)
	m.freeOf = func(d string) (int64, int64, error) {
		if d != "/home/me" {
			return 0, 0, os.ErrNotExist
		}
		return free, 1000e9, nil
	}
	_, _, ok := m.Lookup([]string{"/home/me"})
	assert.False(t, ok, "nothing measured yet")

	at := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	rep := &doctor.Report{CPU: doctor.CPUInfo{Model: "Test CPU"}, Memory: doctor.MemoryInfo{TotalBytes: 64e9}, Seconds: 12,
		Disks: []doctor.DiskResult{{Path: "/home/me", FreeBytes: 900e9, TotalBytes: 1000e9}, {Path: "/gone", FreeBytes: 5e9, TotalBytes: 9e9}}}
	require.NoError(t, m.Keep(rep, []string{"/home/me"}, at))
	got, when, ok := m.Lookup([]string{"/home/me/models/K3"})
	assert.True(t, ok, "a model folder on the disk measured")
	assert.Equal(t, "Test CPU", got.CPU.Model)
	assert.True(t, at.Equal(when))
	// a download since filled the disk: its free space is read again
	free = 100e9
	got, _, _ = m.Lookup([]string{"/home/me"})
	assert.Equal(t, []uint64{100e9, 5e9}, []uint64{got.Disks[0].FreeBytes, got.Disks[1].FreeBytes})
	assert.Equal(t, uint64(900e9), rep.Disks[0].FreeBytes, "the measurement itself is kept as it was")
	_, _, ok = m.Lookup([]string{"/home/me/models/K3", "/mnt/nvme2/K3"})
	assert.False(t, ok, "a trunk on another disk")
	_, _, ok = m.Lookup([]string{"/net/K3"})
	assert.False(t, ok, "a disk that cannot be named")

	// the next start reads it back from the data folder
	again := NewMachineMemo(data)
	again.deviceOf, again.freeOf = m.deviceOf, m.freeOf
	got, when, ok = again.Lookup([]string{"/home/me/models/K3"})
	require.True(t, ok)
	assert.Equal(t, "Test CPU", got.CPU.Model)
	assert.Equal(t, 12.0, got.Seconds)
	assert.True(t, at.Equal(when))

	// a damaged file is no measurement
	require.NoError(t, os.WriteFile(filepath.Join(data, machineFile), []byte("{"), 0o644))
	r, _ := NewMachineMemo(data).Last()
	assert.Nil(t, r)

	for _, c := range []struct {
		ago  time.Duration
		want string
	}{{20 * time.Second, "a moment ago"}, {5 * time.Minute, "5 min ago"}, {3 * time.Hour, "3 h ago"}, {50 * time.Hour, "2 days ago"}} {
		assert.Equal(t, c.want, MeasuredAgo(at, at.Add(c.ago)))
	}
}
