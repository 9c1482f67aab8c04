package plan

import (
	"runtime/debug"
	"runtime/metrics"
)

// The memory plan's process base is the process's resident size when the
// model is opened (engine.Open samples machine.RSS), and its parts are
// what the engine allocates. Neither holds the Go runtime's own overhead:
// the collector lets the heap grow GOGC percent (100: as much again) above
// the bytes live before it collects, and the scavenger keeps up to 10%
// above that goal resident before it returns freed memory to the system
// (retainExtraPercent in the runtime's mgcscavenge.go). In the app the live
// heap is the window toolkit's 40-45 MB plus the engine's state, cache and
// buffers, and drawing makes garbage all the time, so with the demo (an
// engine of ~17 MB) a normal chat was 10-15 MB above the plan: the base had
// been sampled somewhere in the heap's swing, and the swing on the
// engine's own part was not counted at all. The app's chat engine therefore
// opens the model with the heap at its low point (LowHeap) and counts the
// swing on the heap live then and on the engine's heap parts
// (RuntimeOverhead of EngineHeap).

// HeapPoint is the Go heap just after a collection.
type HeapPoint struct {
	Live, Goal int64 // bytes live, and the heap size the next collection is due at
	GOGC       int64 // GOGC percent (-1: the collector is off)
}

// retainExtra is the share above the heap goal the runtime's scavenger
// keeps resident.
const retainExtra = 0.10

// LowHeap collects, returns the freed heap to the system and reads the
// heap then: a process size sampled right after holds the live heap and
// nothing the collector has freed.
func LowHeap() HeapPoint {
	debug.FreeOSMemory()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return HeapPoint{GOGC: -1} // a runtime without these metrics: nothing to count
		}
	}
	return HeapPoint{Live: int64(s[0].Value.Uint64()), Goal: int64(s[1].Value.Uint64()), GOGC: int64(s[2].Value.Uint64())}
}

// EngineHeap is what of plan p the engine holds on the Go heap: the KDA
// state and its copies, the MLA cache, the buffers and the speculative
// record, the vision tower and a picture's work, and without a packed trunk the layers and the model tables too
// (read from the shards into the heap). From a packed trunk the pinned
// layers, the ring and the tables are read into memory mapped outside the
// heap (direct.AllocHuge), as are the expert cache's slots.
func (p *Plan) EngineHeap(packed bool) int64 {
	n := p.State + p.KV + p.Buffers + p.transient() + p.residentTower() + p.Spec
	if !packed {
		n += p.PinnedBytes + p.Globals
	}
	return n
}

// RuntimeOverhead (the heap's swing) is how far above its live bytes the
// Go heap may stay resident once the engine holds engineHeap bytes on it
// (Plan.EngineHeap) besides the heap live at h:
// the collector's goal grows by GOGC percent of those too, and the
// scavenger keeps retainExtra above the goal. 0 with the collector off.
func RuntimeOverhead(h HeapPoint, engineHeap int64) int64 {
	if h.GOGC < 0 || h.Goal < h.Live {
		return 0
	}
	goal := float64(h.Goal) + (1+float64(h.GOGC)/100)*float64(engineHeap)
	return max(int64((1+retainExtra)*goal)-h.Live-engineHeap, 0)
}

// HeapLimit is the Go runtime's memory limit that keeps a process that
// runs plan p within p.Total (runtime/debug.SetMemoryLimit): the total
// less what is resident outside the Go heap (the mapped buffers, packed:
// the pinned layers, the model tables, the ring and their whole pages,
// and the expert cache's arena either way). Under it the collector runs
// before the heap's swing (RuntimeOverhead) would take the process past
// the plan, as a long prefill chunk's garbage otherwise can: each layer
// of a pass leaves its chunk's activations behind.
// notGo is what of the process base is not the Go runtime's memory (its
// code and data, the C libraries; NotGo).
func (p *Plan) HeapLimit(packed bool, notGo int64) int64 {
	outside := p.RingBytes + p.CacheBytes + p.Pages + max(notGo, 0)
	if packed {
		outside += p.PinnedBytes + p.Globals
	}
	// a tenth below: the limit is soft, the collector runs beside the
	// allocating forward and the pages it frees return to the system a
	// little later, so the resident peak stays a little above the limit
	return max((p.Total-outside)*9/10, 0)
}

// NotGo is what of the process's resident size rss is not memory the Go
// runtime holds (its code, static data, the C libraries): rss less the
// runtime's memory less what it has released to the system.
func NotGo(rss int64) int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return max(rss-int64(s[0].Value.Uint64()-s[1].Value.Uint64()), 0)
}
