package plan

// Memory is what the machine (and the process's cgroup) allows. It is
// plain numbers: machine reads them and doctor.PlanMemory converts.
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
