package plan

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is what the machine (and the process's cgroup) allows.
type Memory struct {
	TotalBytes     int64
	AvailableBytes int64 // MemAvailable
	CgroupLimit    int64 // memory.max of the process's cgroup; 0 when unlimited or unknown
	CgroupUsage    int64 // memory.current; 0 when unknown
}

// Usable is the memory a plan may use: MemAvailable, lowered to what the
// cgroup limit leaves when there is one.
func (m Memory) Usable() int64 {
	u := m.AvailableBytes
	if m.CgroupLimit > 0 {
		u = min(u, m.CgroupLimit-m.CgroupUsage)
	}
	return max(u, 0)
}

// ReadMemory reads /proc/meminfo and the cgroup (v2, else v1) limits.
func ReadMemory() (Memory, error) { return ReadMemoryAt("/") }

// ReadMemoryAt reads the same files below root (tests use a fake tree).
func ReadMemoryAt(root string) (Memory, error) {
	var m Memory
	raw, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
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
		return m, fmt.Errorf("memory: %s has no MemTotal/MemAvailable", filepath.Join(root, "proc/meminfo"))
	}
	m.CgroupLimit, m.CgroupUsage = cgroupMemory(root)
	return m, nil
}

// cgroupMemory finds the process's cgroup and reads its limit and usage.
func cgroupMemory(root string) (limit, usage int64) {
	raw, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, lim, cur string
		switch {
		case parts[0] == "0" && parts[1] == "": // cgroup v2
			dir = filepath.Join(root, "sys/fs/cgroup", parts[2])
			lim, cur = "memory.max", "memory.current"
		case strings.Contains(","+parts[1]+",", ",memory,"): // v1
			dir = filepath.Join(root, "sys/fs/cgroup/memory", parts[2])
			lim, cur = "memory.limit_in_bytes", "memory.usage_in_bytes"
		default:
			continue
		}
		// the tightest limit on the way up to the root counts
		for d := dir; ; d = filepath.Dir(d) {
			if l := readInt(filepath.Join(d, lim)); l > 0 && l < 1<<60 && (limit == 0 || l < limit) {
				limit = l
				usage = readInt(filepath.Join(d, cur))
			}
			if len(d) <= len(filepath.Join(root, "sys/fs/cgroup")) {
				break
			}
		}
		if limit > 0 {
			return limit, usage
		}
	}
	return 0, 0
}

func readInt(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0 // "max"
	}
	return v
}

// CurrentRSS is the process's resident set size now (VmRSS), 0 if unknown.
func CurrentRSS() int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}
