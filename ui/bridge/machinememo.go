package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k3/doctor"
	"k3/storage/atomicfile"
	"k3/storage/direct"
)

// MachineMemo keeps the last measurement of this machine (memory,
// processor, the disks of the folders it measured) with its time, in
// memory and in a file beside the app's data, so the setup wizard opened
// again ("Other models…", a later start) shows it instead of measuring
// for 10-16 s. Memory and processor do not change; a disk does not either:
// a folder on a disk measured before needs no new measurement, a folder on
// another disk does. Measure again (the wizard's button) replaces it.
type MachineMemo struct {
	path     string
	deviceOf func(dir string) string // the disk a folder is on (doctor.DeviceOf)
	// freeOf is a folder's free and total bytes now (direct.DiskFree):
	// the free space is read again, the rest of a disk is kept
	freeOf func(dir string) (free, total int64, err error)
	last   *machineMeasured
}

// machineMeasured is a measurement as the memo keeps it (and its file).
type machineMeasured struct {
	At     time.Time      `json:"at"`
	Dirs   []string       `json:"dirs"`
	Disks  []string       `json:"disks"` // the disk of each of Dirs ("" unknown)
	Report *doctor.Report `json:"report"`
}

// machineFile is the memo's file in the app's data folder.
const machineFile = "machine.json"

// NewMachineMemo is the memo kept in dataDir ("": in memory only), with
// the measurement kept there before when there is one.
func NewMachineMemo(dataDir string) *MachineMemo {
	m := &MachineMemo{deviceOf: doctor.DeviceOf, freeOf: direct.DiskFree}
	if dataDir == "" {
		return m
	}
	m.path = filepath.Join(dataDir, machineFile)
	var kept machineMeasured
	if b, err := os.ReadFile(m.path); err == nil && json.Unmarshal(b, &kept) == nil && kept.Report != nil &&
		len(kept.Disks) == len(kept.Dirs) {
		m.last = &kept
	}
	return m
}

// Last is the last measurement and when it was made (nil: none).
func (m *MachineMemo) Last() (*doctor.Report, time.Time) {
	if m == nil || m.last == nil {
		return nil, time.Time{}
	}
	return m.last.Report, m.last.At
}

// Lookup is the last measurement when it covers dirs: each of them is one
// it measured or on a disk it measured. Its disks' free space is read
// again (a download since fills a disk; a stale number would suggest it).
func (m *MachineMemo) Lookup(dirs []string) (*doctor.Report, time.Time, bool) {
	if m == nil || m.last == nil {
		return nil, time.Time{}, false
	}
	for _, d := range dirs {
		if slices.Contains(m.last.Dirs, d) {
			continue
		}
		disk := m.deviceOf(d)
		if disk == "" || !slices.Contains(m.last.Disks, disk) {
			return nil, time.Time{}, false
		}
	}
	return m.freshFree(m.last.Report), m.last.At, true
}

// freshFree is rep with its disks' free space as it is now.
func (m *MachineMemo) freshFree(rep *doctor.Report) *doctor.Report {
	r := *rep
	r.Disks = slices.Clone(rep.Disks)
	for i, d := range r.Disks {
		if free, total, err := m.freeOf(d.Path); err == nil && free >= 0 && total > 0 {
			r.Disks[i].FreeBytes, r.Disks[i].TotalBytes = uint64(free), uint64(total)
		}
	}
	return &r
}

// Keep keeps rep, the measurement of dirs made at at, and writes it to the
// memo's file (atomically; an error leaves the memo in memory).
func (m *MachineMemo) Keep(rep *doctor.Report, dirs []string, at time.Time) error {
	if rep == nil {
		return errors.New("no measurement to keep")
	}
	kept := &machineMeasured{At: at, Dirs: slices.Clone(dirs), Report: rep}
	for _, d := range dirs {
		kept.Disks = append(kept.Disks, m.deviceOf(d))
	}
	m.last = kept
	if m.path == "" {
		return nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(m.path, b); err != nil {
		return fmt.Errorf("the measurement of this machine could not be kept: %w", err)
	}
	return nil
}

// MeasuredAgo says when a measurement was made, as people say it:
// "a moment ago", "5 min ago", "3 h ago", "2 days ago".
func MeasuredAgo(at, now time.Time) string {
	d := now.Sub(at)
	switch {
	case d < time.Minute:
		return "a moment ago"
	case d < 48*time.Hour:
		return Duration(d) + " ago"
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}
