package doctor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/doctor/measure"
	"k3/storage/direct"
	"k3/storage/trunk"
	"k3/storage/units"
	"k3/storage/verify"
)

// Disk measurement, done the way the engine reads (doctor/measure, which
// `k3 bench` reads with too):
//
//   - O_DIRECT (storage/direct) into 2 MiB-aligned MADV_HUGEPAGE buffers;
//   - random reads of ExpertBlock bytes (one routed expert, 17.55 MB rounded
//     up to 4 KiB) at 4 KiB-aligned random offsets, at queue depth 1 and 8;
//   - sequential reads of SeqBlock (64 MiB), as the trunk is streamed.
//
// The data read is either the model's own shards already in the directory
// (read-only) or a temporary probe file written with O_DIRECT (so it never
// sits in the page cache) and deleted afterwards. If the filesystem refuses
// O_DIRECT the probe is read buffered after fsync + posix_fadvise(DONTNEED)
// and, as root, sync + drop_caches; the result says which, and that such a
// number may include page-cache hits.
const (
	ExpertBlock = 17_551_360 // 17.55 MB rounded up to 4096
	SeqBlock    = 64 << 20
	minProbe    = 256 << 20
)

// DiskResult is the measurement of one directory. Speeds are decimal GB/s;
// nil when not measured (Notes say why).
type DiskResult struct {
	Path          string   `json:"path"`
	Device        string   `json:"device,omitempty"`
	Filesystem    string   `json:"filesystem,omitempty"`
	FreeBytes     uint64   `json:"free_bytes"`
	TotalBytes    uint64   `json:"total_bytes"`
	ReadGBpsQD1   *float64 `json:"read_gbps_qd1"`
	ReadGBpsQD8   *float64 `json:"read_gbps_qd8"`
	SeqGBps       *float64 `json:"seq_gbps"`
	WriteGBps     *float64 `json:"write_gbps"`
	Direct        bool     `json:"direct"`
	HugePages     bool     `json:"huge_pages"`
	ProbeBytes    int64    `json:"probe_bytes"`
	ProbeSource   string   `json:"probe_source,omitempty"` // "temporary file" or "model shards"
	CacheControl  string   `json:"cache_control,omitempty"`
	SameDeviceAs  string   `json:"same_device_as,omitempty"`
	ModelBytes    int64    `json:"model_bytes_present"` // bytes of released shards with the right size
	ModelComplete bool     `json:"model_complete"`
	// Trunk is the packed trunk the directory holds (nil: none).
	Trunk *TrunkFound `json:"trunk,omitempty"`
	Notes []string    `json:"notes"`
}

// TrunkFound is a packed trunk (k3 pack) found in a directory.
type TrunkFound struct {
	Compression       string `json:"compression"` // "" uncompressed, "BF16C"
	Bytes             int64  `json:"bytes"`       // trunk.bin
	UncompressedBytes int64  `json:"uncompressed_bytes"`
	Layers            int    `json:"layers"`
}

// Ratio is how many times smaller compression made the trunk (1 when
// it is not compressed).
func (t *TrunkFound) Ratio() float64 { return float64(t.UncompressedBytes) / float64(max(t.Bytes, 1)) }

// trunkIn reads the trunk.json of dir, if it holds a complete trunk.
func trunkIn(dir string) *TrunkFound {
	if _, err := os.Stat(filepath.Join(dir, trunk.ManifestFile)); err != nil {
		return nil
	}
	m, err := trunk.ReadManifest(dir)
	if err != nil {
		return nil
	}
	return &TrunkFound{Compression: m.Compression, Bytes: m.TotalBytes, UncompressedBytes: m.UncompressedBytes(), Layers: m.Layers()}
}

// diskPlan bounds one directory's measurement.
type diskPlan struct {
	probe    int64         // bytes of probe data wanted
	device   bool          // read the block device itself when allowed (root)
	phase    time.Duration // per read phase (qd1, qd8, seq)
	writeMax time.Duration // cap on writing the probe
}

func f64(x float64) *float64 { x = float64(int64(x*1000+0.5)) / 1000; return &x }

// modelShards returns the released shards of the right size in dir.
func modelShards(dir string) (files []string, bytes int64, complete bool) {
	n := 0
	for _, s := range verify.ReleasedShards {
		st, err := os.Stat(filepath.Join(dir, s.Name))
		if err == nil && st.Mode().IsRegular() && st.Size() == s.Size {
			files = append(files, filepath.Join(dir, s.Name))
			bytes += s.Size
			n++
		}
	}
	complete = n == verify.ShardCount
	for _, t := range verify.TokenizerFiles {
		if _, err := os.Stat(filepath.Join(dir, t)); err != nil {
			complete = false
		}
	}
	return files, bytes, complete
}

// existingData lists data already in dir that reads like the engine's:
// the model's shards if present, else any regular files of at least one
// expert block, oldest first (old data is cold: neither the page cache nor
// a virtual disk's host cache is likely to hold it). Read-only.
func existingData(dir string, shards []string) ([]string, int64) {
	var total int64
	if len(shards) > 0 {
		for _, p := range shards {
			if st, err := os.Stat(p); err == nil {
				total += st.Size()
			}
		}
		return shards, total
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0
	}
	type fe struct {
		path string
		size int64
		mod  time.Time
	}
	var fs []fe
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), measure.ProbePrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Size() < ExpertBlock {
			continue
		}
		fs = append(fs, fe{filepath.Join(dir, e.Name()), info.Size(), info.ModTime()})
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].mod.Before(fs[j].mod) })
	var out []string
	for _, f := range fs {
		out = append(out, f.path)
		total += f.size
	}
	return out, total
}

// measureDisk measures dir. It never returns an error: what fails becomes
// a note and a nil speed. progress receives (phase, fraction).
func measureDisk(ctx context.Context, dir string, pl diskPlan, progress func(phase string, frac float64)) DiskResult {
	r := DiskResult{Path: dir, Notes: []string{}}
	abs, err := filepath.Abs(dir)
	if err == nil {
		r.Path = abs
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		r.Notes = append(r.Notes, fmt.Sprintf("%s is not a directory (%v): nothing measured; create it first", dir, err))
		return r
	}
	statDisk(&r, dir)
	if r.Filesystem == "tmpfs" || r.Filesystem == "ramfs" {
		r.Notes = append(r.Notes, "this directory is on "+r.Filesystem+" (RAM), not a disk: its speed says nothing about storage")
	}
	shards, have, complete := modelShards(dir)
	r.ModelBytes, r.ModelComplete = have, complete
	r.Trunk = trunkIn(dir)

	probes, cleanup, ok := openProbes(ctx, dir, shards, pl, &r, progress)
	if !ok {
		return r
	}
	defer cleanup()
	if len(probes) == 0 {
		r.Notes = append(r.Notes, "no readable shard: read speed not measured")
		return r
	}
	noteCacheControl(&r, probes)
	readPatterns(ctx, dir, probes, pl, &r, progress)
	if ctx.Err() != nil {
		r.Notes = append(r.Notes, "measurement cancelled")
	}
	if r.ProbeSource == "temporary file" && r.Direct {
		r.Notes = append(r.Notes, fmt.Sprintf("%s freshly written probe: on a virtual disk the host may still hold it in its cache and report more than the disk delivers cold; run as root to read the device itself, or run doctor on the model directory once downloaded", units.Bytes(r.ProbeBytes)))
	}
	return r
}

// openProbes chooses what to read: the directory's own data when there is
// enough of it, else the filesystem's block device (read-only, as root),
// else a temporary probe file it writes (and measures the write of). The
// cleanup closes (and for a probe file removes) what was opened; ok is
// false when nothing can be read, with r's notes saying why.
func openProbes(ctx context.Context, dir string, shards []string, pl diskPlan, r *DiskResult, progress func(string, float64)) (probes measure.Targets, cleanup func(), ok bool) {
	if files, total := existingData(dir, shards); total >= min(pl.probe, 4<<30) && pl.probe > 0 {
		r.ProbeSource = "existing files"
		if len(shards) > 0 {
			r.ProbeSource = "model shards"
		}
		for _, p := range files {
			if ts, err := measure.OpenTargets([]string{p}); err == nil {
				probes = append(probes, ts...)
				r.ProbeBytes += ts.Bytes()
			}
		}
		return probes, probes.Close, true
	}
	if bd, bsize, ok := openBlockDevice(r.Device, pl); ok {
		// The filesystem's own block device, read-only: cold data over the
		// whole device, so neither the page cache nor a virtual disk's host
		// cache can serve it. Needs read permission on /dev (root).
		r.ProbeSource = "block device " + bd.Path() + " (read-only)"
		r.ProbeBytes = bsize
		probes = measure.Targets{{F: bd, Size: bsize}}
		r.Notes = append(r.Notes, "read the device "+bd.Path()+" directly (read-only, O_DIRECT): write speed not measured")
		return probes, probes.Close, true
	}
	return writeProbe(ctx, dir, pl, r, progress)
}

// writeProbe writes a temporary probe file sized by the plan and the free
// space (leaving 2 GiB), measuring the write speed on the way.
func writeProbe(ctx context.Context, dir string, pl diskPlan, r *DiskResult, progress func(string, float64)) (measure.Targets, func(), bool) {
	size := pl.probe
	avail := int64(r.FreeBytes) - 2<<30 // leave 2 GiB
	if avail/4 < size {
		size = avail / 4
	}
	size &^= measure.WriteBlock - 1
	if size < minProbe {
		r.Notes = append(r.Notes, fmt.Sprintf("only %s free: too little for a %d MiB probe file; read speed not measured", units.Bytes(int64(r.FreeBytes)), minProbe>>20))
		return nil, nil, false
	}
	if size < pl.probe {
		r.Notes = append(r.Notes, fmt.Sprintf("probe file reduced to %s by free space", units.Bytes(size)))
	}
	pf, wgbps, err := measure.WriteProbe(ctx, dir, measure.Probe{Size: size, MinSize: minProbe, MaxTime: pl.writeMax,
		Progress: func(f float64) { progress("write", f) }})
	if err != nil {
		if ctx.Err() == nil {
			r.Notes = append(r.Notes, "could not write a probe file: "+err.Error()+"; read speed not measured")
		}
		return nil, nil, false
	}
	r.ProbeSource = "temporary file"
	r.WriteGBps = f64(wgbps)
	if pf.F.Direct() {
		r.CacheControl = "probe written and read with O_DIRECT: the page cache is bypassed"
	}
	r.ProbeBytes = pf.Size
	cleanup := func() {
		name := pf.F.Path()
		pf.F.Close()
		os.Remove(name)
	}
	return measure.Targets{pf}, cleanup, true
}

// noteCacheControl records whether the probes are read with O_DIRECT and,
// when not, how (if at all) the page cache was emptied before reading.
func noteCacheControl(r *DiskResult, probes measure.Targets) {
	r.Direct = true
	for _, p := range probes {
		if !p.F.Direct() {
			r.Direct = false
			if n := p.F.Note(); n != "" && !strings.Contains(strings.Join(r.Notes, "\n"), n) {
				r.Notes = append(r.Notes, n)
			}
		}
	}
	if r.CacheControl == "" {
		if r.Direct {
			r.CacheControl = "O_DIRECT: the page cache is bypassed"
		} else {
			var fs []*direct.File
			for _, p := range probes {
				fs = append(fs, p.F)
			}
			r.CacheControl = "none possible: buffered reads may be served from the page cache"
			if how := measure.DropCaches(fs...).How(); how != "" {
				r.CacheControl = "buffered reads after " + how
			}
		}
	}
	if !r.Direct {
		r.Notes = append(r.Notes, "reads were buffered, so part of them may have come from the page cache; the engine's O_DIRECT path is unavailable here")
	}
}

// readPatterns measures the engine's two read patterns: routed experts
// (random, one expert per request, one or eight in flight) and the trunk
// (sequential, from a random point of the first probe so that a rerun does
// not read what a host cache kept from the last one).
func readPatterns(ctx context.Context, dir string, probes measure.Targets, pl diskPlan, r *DiskResult, progress func(string, float64)) {
	seed := uint64(len(dir))
	var start int64
	if p := probes[0]; p.Size > 4*SeqBlock {
		start = rand.New(rand.NewPCG(seed, 42)).Int64N(p.Size / 2)
	}
	r.HugePages = true
	var readErr error
	phase := func(name string, d measure.DiskRead) *float64 {
		if ctx.Err() != nil {
			return nil
		}
		d.Duration, d.Seed = pl.phase, seed
		d.Progress = func(f float64) { progress(name, f) }
		run, err := measure.ReadDisk(ctx, probes, d)
		r.HugePages = r.HugePages && run.Huge
		if err != nil && ctx.Err() == nil && readErr == nil {
			readErr = err
		}
		if run.Bytes == 0 || ctx.Err() != nil {
			return nil
		}
		return f64(run.GBps)
	}
	r.ReadGBpsQD1 = phase("qd1", measure.DiskRead{Request: ExpertBlock, QD: 1, Random: true})
	r.ReadGBpsQD8 = phase("qd8", measure.DiskRead{Request: ExpertBlock, QD: 8, Random: true})
	r.SeqGBps = phase("seq", measure.DiskRead{Request: SeqBlock, QD: 1, Start: start})
	if !r.HugePages {
		r.Notes = append(r.Notes, "huge pages were refused for the read buffers: O_DIRECT runs at about half speed this way (check /sys/kernel/mm/transparent_hugepage/enabled)")
	}
	if readErr != nil {
		r.Notes = append(r.Notes, "read error: "+readErr.Error())
	}
}

// sameDevice marks results that share a device with an earlier one.
func sameDevice(rs []DiskResult) {
	first := map[string]string{}
	for i := range rs {
		d := rs[i].Device
		if d == "" {
			continue
		}
		if p, ok := first[d]; ok {
			rs[i].SameDeviceAs = p
			continue
		}
		first[d] = rs[i].Path
	}
}

// devicesOf returns the distinct device keys of dirs (a dir whose device is
// unknown counts as its own).
func devicesOf(dirs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		k := deviceOf(d)
		if k == "" {
			k = "dir:" + d
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// statDisk fills r's free space, size, device and filesystem type for dir
// (each left zero when unknown).
func statDisk(r *DiskResult, dir string) {
	if free, total, err := direct.DiskFree(dir); err == nil {
		r.FreeBytes, r.TotalBytes = uint64(free), uint64(total)
	}
	r.Device, r.Filesystem = deviceOf(dir), fsType(dir)
}
