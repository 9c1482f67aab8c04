package doctor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k3/storage/direct"
	"k3/storage/units"
	"k3/storage/verify"
)

// Disk measurement, done the way the engine reads:
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
	writeBlock  = 64 << 20
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
	Notes         []string `json:"notes"`
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
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".k3-doctor-probe") {
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

type probeFile struct {
	f    *direct.File
	size int64
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

	var probes []probeFile
	var cleanup func()
	if files, total := existingData(dir, shards); total >= min(pl.probe, 4<<30) && pl.probe > 0 {
		r.ProbeSource = "existing files"
		if len(shards) > 0 {
			r.ProbeSource = "model shards"
		}
		for _, p := range files {
			f, err := direct.Open(p)
			if err != nil {
				continue
			}
			sz, _ := f.Size()
			probes = append(probes, probeFile{f, sz})
			r.ProbeBytes += sz
		}
		_ = total
		cleanup = func() {
			for _, p := range probes {
				p.f.Close()
			}
		}
	} else if bd, bsize, ok := openBlockDevice(r.Device, pl); ok {
		// The filesystem's own block device, read-only: cold data over the
		// whole device, so neither the page cache nor a virtual disk's host
		// cache can serve it. Needs read permission on /dev (root).
		r.ProbeSource = "block device " + bd.Path() + " (read-only)"
		r.ProbeBytes = bsize
		probes = []probeFile{{bd, bsize}}
		cleanup = func() { bd.Close() }
		r.Notes = append(r.Notes, "read the device "+bd.Path()+" directly (read-only, O_DIRECT): write speed not measured")
	} else {
		size := pl.probe
		avail := int64(r.FreeBytes) - 2<<30 // leave 2 GiB
		if avail/4 < size {
			size = avail / 4
		}
		size &^= writeBlock - 1
		if size < minProbe {
			r.Notes = append(r.Notes, fmt.Sprintf("only %s free: too little for a %d MiB probe file; read speed not measured", units.Bytes(int64(r.FreeBytes)), minProbe>>20))
			return r
		}
		if size < pl.probe {
			r.Notes = append(r.Notes, fmt.Sprintf("probe file reduced to %s by free space", units.Bytes(size)))
		}
		pf, wgbps, cc, err := writeProbe(ctx, dir, size, pl.writeMax, func(f float64) { progress("write", f) })
		if err != nil {
			if ctx.Err() != nil {
				return r
			}
			r.Notes = append(r.Notes, "could not write a probe file: "+err.Error()+"; read speed not measured")
			return r
		}
		r.ProbeSource = "temporary file"
		r.WriteGBps = f64(wgbps)
		r.CacheControl = cc
		r.ProbeBytes = pf.size
		probes = []probeFile{pf}
		cleanup = func() {
			name := pf.f.Path()
			pf.f.Close()
			os.Remove(name)
		}
	}
	defer cleanup()
	if len(probes) == 0 {
		r.Notes = append(r.Notes, "no readable shard: read speed not measured")
		return r
	}
	r.Direct = true
	for _, p := range probes {
		if !p.f.Direct() {
			r.Direct = false
			if n := p.f.Note(); n != "" && !strings.Contains(strings.Join(r.Notes, "\n"), n) {
				r.Notes = append(r.Notes, n)
			}
		}
	}
	if r.CacheControl == "" {
		if r.Direct {
			r.CacheControl = "O_DIRECT: the page cache is bypassed"
		} else {
			r.CacheControl = dropCaches(probes)
		}
	}
	if !r.Direct {
		r.Notes = append(r.Notes, "reads were buffered, so part of them may have come from the page cache; the engine's O_DIRECT path is unavailable here")
	}

	var huge atomic.Bool
	huge.Store(true)
	alloc := func(n int) (*direct.Buffer, error) {
		b, err := direct.AllocHuge(n)
		if err == nil && !b.Huge() {
			huge.Store(false)
		}
		return b, err
	}
	rnd := rand.New(rand.NewPCG(uint64(len(dir)), 42))
	var rndMu sync.Mutex
	pick := func(block int64) (probeFile, int64, bool) {
		rndMu.Lock()
		defer rndMu.Unlock()
		for tries := 0; tries < 8; tries++ {
			p := probes[rnd.IntN(len(probes))]
			if p.size < block {
				continue
			}
			off := direct.AlignDown(rnd.Int64N(p.size - block + 1))
			return p, off, true
		}
		return probeFile{}, 0, false
	}
	var firstErr error
	var errMu sync.Mutex
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}

	randomPhase := func(name string, qd int) *float64 {
		if ctx.Err() != nil {
			return nil
		}
		bufs := make([]*direct.Buffer, qd)
		for i := range bufs {
			b, err := alloc(ExpertBlock)
			if err != nil {
				fail(err)
				for _, x := range bufs[:i] {
					x.Free()
				}
				return nil
			}
			bufs[i] = b
		}
		defer func() {
			for _, b := range bufs {
				b.Free()
			}
		}()
		var total atomic.Int64
		start := time.Now()
		deadline := start.Add(pl.phase)
		var wg sync.WaitGroup
		for q := 0; q < qd; q++ {
			wg.Add(1)
			go func(buf []byte) {
				defer wg.Done()
				for time.Now().Before(deadline) && ctx.Err() == nil {
					p, off, ok := pick(ExpertBlock)
					if !ok {
						fail(errors.New("probe data smaller than one expert block"))
						return
					}
					if _, err := p.f.ReadAt(buf, off); err != nil {
						fail(err)
						return
					}
					total.Add(ExpertBlock)
					if q := total.Load(); q%(ExpertBlock*8) == 0 {
						progress(name, min(1, time.Since(start).Seconds()/pl.phase.Seconds()))
					}
				}
			}(bufs[q].Bytes())
		}
		wg.Wait()
		el := time.Since(start).Seconds()
		progress(name, 1)
		if total.Load() == 0 || ctx.Err() != nil {
			return nil
		}
		return f64(float64(total.Load()) / el / 1e9)
	}
	seqPhase := func() *float64 {
		if ctx.Err() != nil {
			return nil
		}
		buf, err := alloc(SeqBlock)
		if err != nil {
			fail(err)
			return nil
		}
		defer buf.Free()
		var total int64
		start := time.Now()
		deadline := start.Add(pl.phase)
		pi, off := 0, int64(0)
		if p := probes[0]; p.size > 4*SeqBlock {
			off = direct.AlignDown(rnd.Int64N(p.size / 2))
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			p := probes[pi]
			n := min(int64(SeqBlock), p.size-off)
			if n < SeqBlock {
				n = direct.AlignDown(n)
			}
			if n <= 0 {
				pi, off = (pi+1)%len(probes), 0
				continue
			}
			if _, err := p.f.ReadAt(buf.Bytes()[:n], off); err != nil {
				fail(err)
				break
			}
			total += n
			off += n
			progress("seq", min(1, time.Since(start).Seconds()/pl.phase.Seconds()))
		}
		el := time.Since(start).Seconds()
		progress("seq", 1)
		if total == 0 || ctx.Err() != nil {
			return nil
		}
		return f64(float64(total) / el / 1e9)
	}
	r.ReadGBpsQD1 = randomPhase("qd1", 1)
	r.ReadGBpsQD8 = randomPhase("qd8", 8)
	r.SeqGBps = seqPhase()
	r.HugePages = huge.Load()
	if !r.HugePages {
		r.Notes = append(r.Notes, "huge pages were refused for the read buffers: O_DIRECT runs at about half speed this way (check /sys/kernel/mm/transparent_hugepage/enabled)")
	}
	if firstErr != nil {
		r.Notes = append(r.Notes, "read error: "+firstErr.Error())
	}
	if ctx.Err() != nil {
		r.Notes = append(r.Notes, "measurement cancelled")
	}
	if r.ProbeSource == "temporary file" && r.Direct {
		r.Notes = append(r.Notes, fmt.Sprintf("%s freshly written probe: on a virtual disk the host may still hold it in its cache and report more than the disk delivers cold; run as root to read the device itself, or run doctor on the model directory once downloaded", units.Bytes(r.ProbeBytes)))
	}
	return r
}

// writeProbe writes a probe file of size bytes with O_DIRECT from a
// huge-page buffer (every 4 KiB page distinct, so no compressing or
// deduplicating layer can shortcut it), fsyncs it and returns it open for
// reading.
func writeProbe(ctx context.Context, dir string, size int64, maxDur time.Duration, progress func(float64)) (probeFile, float64, string, error) {
	name := filepath.Join(dir, fmt.Sprintf(".k3-doctor-probe-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f, err := direct.Create(name)
	if err != nil {
		return probeFile{}, 0, "", err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(name)
		}
	}()
	buf, err := direct.AllocHuge(writeBlock)
	if err != nil {
		return probeFile{}, 0, "", err
	}
	defer buf.Free()
	b := buf.Bytes()
	rnd := rand.New(rand.NewPCG(uint64(size), 1))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rnd.Uint64())
	}
	start := time.Now()
	var off int64
	for off < size {
		if err := ctx.Err(); err != nil {
			return probeFile{}, 0, "", err
		}
		for p := 0; p < len(b); p += direct.Align { // make every page unique
			binary.LittleEndian.PutUint64(b[p:], uint64(off)+uint64(p))
		}
		if _, err := f.WriteAt(b, off); err != nil {
			return probeFile{}, 0, "", err
		}
		off += int64(len(b))
		progress(float64(off) / float64(size))
		if time.Since(start) > maxDur && off >= minProbe {
			break // slow disk: measure what was written
		}
	}
	if err := f.Sync(); err != nil {
		return probeFile{}, 0, "", err
	}
	wgbps := float64(off) / time.Since(start).Seconds() / 1e9
	cc := ""
	if f.Direct() {
		cc = "probe written and read with O_DIRECT: the page cache is bypassed"
	}
	ok = true
	return probeFile{f, off}, wgbps, cc, nil
}

// dropCaches evicts buffered probe data from the page cache as far as this
// process is allowed, and says how.
func dropCaches(probes []probeFile) string {
	var how []string
	okAll := true
	for _, p := range probes {
		_ = p.f.Sync()
		if err := p.f.DropCache(); err != nil {
			okAll = false
		}
	}
	if okAll {
		how = append(how, "posix_fadvise(DONTNEED)")
	}
	if os.Geteuid() == 0 {
		syncAll()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0o200); err == nil {
			how = append(how, "sync + drop_caches (root)")
		}
	}
	if len(how) == 0 {
		return "none possible: buffered reads may be served from the page cache"
	}
	return "buffered reads after " + strings.Join(how, " and ")
}

// statDisk fills r's free space, size, device and filesystem type for dir
// (each left zero when unknown).
func statDisk(r *DiskResult, dir string) {
	if free, total, err := direct.DiskFree(dir); err == nil {
		r.FreeBytes, r.TotalBytes = uint64(free), uint64(total)
	}
	r.Device, r.Filesystem = deviceOf(dir), fsType(dir)
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
