package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k3/storage/direct"
)

// A Target is data a disk measurement reads: the first Size bytes of F
// (a block device's size does not come from stat, so it is given).
type Target struct {
	F    *direct.File
	Size int64
}

// Targets are what a measurement reads, in order.
type Targets []Target

// OpenTargets opens the files read-only with O_DIRECT (direct.Open falls
// back to buffered reads where the filesystem refuses it).
func OpenTargets(paths []string) (Targets, error) {
	var ts Targets
	for _, p := range paths {
		f, err := direct.Open(p)
		if err != nil {
			ts.Close()
			return nil, err
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			ts.Close()
			return nil, err
		}
		ts = append(ts, Target{f, size})
	}
	return ts, nil
}

// Close closes every target's file.
func (ts Targets) Close() {
	for _, t := range ts {
		t.F.Close()
	}
}

// Bytes is the targets' total size.
func (ts Targets) Bytes() int64 {
	var n int64
	for _, t := range ts {
		n += t.Size
	}
	return n
}

// DiskRead describes one read measurement. Requests go into 2 MiB-aligned
// huge-page buffers, one per request in flight, faulted in before the clock
// starts, through each target's direct.File (O_DIRECT where the filesystem
// allows it): the way the engine reads its trunk and experts.
type DiskRead struct {
	Request int // bytes per request (a multiple of direct.Align)
	QD      int // requests in flight (<= 0: 1)
	// Random reads whole requests at random aligned offsets of a random
	// target (of at least Request bytes), seeded by Seed. Otherwise the
	// targets are read in order in requests of Request bytes (a target's
	// last one shorter, aligned down), from Start bytes into the first
	// target (rounded down to a request), once, or round and round while
	// Duration lasts.
	Random bool
	Seed   uint64
	Start  int64
	// Limit stops the measurement once the request that reaches Limit
	// bytes is issued (0: none); Duration stops issuing requests once it
	// has passed (0: none).
	Limit    int64
	Duration time.Duration
	// When labels the run (for example "before" or "after" what it bounds).
	When string
	// Progress, when not nil, receives the fraction done after each
	// request (and 1 at the end), from the reading goroutines one at a time.
	Progress func(frac float64)
}

// DiskRun is one read measurement.
type DiskRun struct {
	When    string  `json:"when,omitempty"`
	QD      int     `json:"queue_depth"`
	Request int     `json:"request_bytes"`
	Random  bool    `json:"random"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gbps"`
	Huge    bool    `json:"huge_pages"` // every buffer was advised huge pages
}

func (r DiskRun) String() string {
	return fmt.Sprintf("%d MiB requests at queue depth %d, %s", r.Request>>20, r.QD, r.When)
}

// ReadDisk runs one read measurement of ts. On a read error or a cancelled
// ctx every reader stops; the run then counts what was read before, and the
// error is returned with it.
func ReadDisk(ctx context.Context, ts Targets, d DiskRead) (DiskRun, error) {
	qd := max(d.QD, 1)
	run := DiskRun{When: d.When, QD: qd, Request: d.Request, Random: d.Random, Huge: true}
	if d.Request < direct.Align || d.Request%direct.Align != 0 {
		return run, fmt.Errorf("measure: request of %d bytes is not a positive multiple of %d", d.Request, direct.Align)
	}
	next, err := d.requests(ts)
	if err != nil {
		return run, err
	}
	var bufs []*direct.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	for range qd {
		b, err := direct.AllocHuge(d.Request)
		if err != nil {
			return run, err
		}
		bufs = append(bufs, b)
		run.Huge = run.Huge && b.Huge()
		clear(b.Bytes()) // fault the pages in before the clock starts
	}
	var (
		read atomic.Int64
		stop atomic.Bool
		errs = make([]error, qd)
		wg   sync.WaitGroup
	)
	t0 := time.Now()
	frac := d.fraction(t0, ts, &read)
	var progressMu sync.Mutex
	report := func() {
		if d.Progress != nil {
			progressMu.Lock() // the readers report one at a time
			d.Progress(frac())
			progressMu.Unlock()
		}
	}
	for w := range qd {
		wg.Add(1)
		go func(buf []byte) {
			defer wg.Done()
			if errs[w] = d.reader(ctx, buf, t0.Add(d.Duration), next, &read, &stop, report); errs[w] != nil {
				stop.Store(true)
			}
		}(bufs[w].Bytes())
	}
	wg.Wait()
	run.Seconds = time.Since(t0).Seconds()
	run.Bytes = read.Load()
	if run.Seconds > 0 {
		run.GBps = float64(run.Bytes) / run.Seconds / 1e9
	}
	if d.Progress != nil {
		d.Progress(1)
	}
	if err := errors.Join(errs...); err != nil {
		return run, err
	}
	return run, ctx.Err()
}

// reader is one of the queue's readers: it reads the requests next gives
// into buf until they end, the deadline passes (for a timed run), another
// reader fails (stop) or ctx is done, counting the bytes in read.
func (d DiskRead) reader(ctx context.Context, buf []byte, deadline time.Time, next func() (Target, int64, int64, bool), read *atomic.Int64, stop *atomic.Bool, report func()) error {
	for !stop.Load() && ctx.Err() == nil {
		if d.Duration > 0 && time.Now().After(deadline) {
			return nil
		}
		t, off, n, ok := next()
		if !ok {
			return nil
		}
		if _, err := t.F.ReadAt(buf[:n], off); err != nil {
			return err
		}
		read.Add(n)
		report()
	}
	return nil
}

// fraction is how far a run started at t0 has come, from 0 to 1: by time
// for a timed run, by bytes against the limit, or against one sequential
// pass over ts when that is the bound.
func (d DiskRead) fraction(t0 time.Time, ts Targets, read *atomic.Int64) func() float64 {
	once := int64(0) // bytes of one sequential pass, when that is the bound
	if !d.Random && d.Duration <= 0 && d.Limit <= 0 {
		once = ts.Bytes()
	}
	return func() float64 {
		f := 0.0
		if once > 0 {
			f = float64(read.Load()) / float64(once)
		}
		if d.Duration > 0 {
			f = time.Since(t0).Seconds() / d.Duration.Seconds()
		}
		if d.Limit > 0 {
			f = max(f, float64(read.Load())/float64(d.Limit))
		}
		return min(f, 1)
	}
}

// requests returns the request generator of d over ts: each call gives the
// next request's target, offset and length, or false when there is none
// (the targets are read once, or Limit bytes are claimed). It is safe for
// concurrent use, and sequential requests are claimed in order, so a limit
// cuts the same requests at every queue depth.
func (d DiskRead) requests(ts Targets) (func() (Target, int64, int64, bool), error) {
	req := int64(d.Request)
	var (
		mu      sync.Mutex
		claimed int64
		pick    func() (Target, int64, int64, bool)
	)
	if d.Random {
		if d.Limit <= 0 && d.Duration <= 0 {
			return nil, errors.New("measure: random reads need a limit or a duration")
		}
		var big Targets
		for _, t := range ts {
			if t.Size >= req {
				big = append(big, t)
			}
		}
		if len(big) == 0 {
			return nil, fmt.Errorf("measure: no data of at least one %d-byte request to read", req)
		}
		rnd := rand.New(rand.NewPCG(d.Seed, 42))
		pick = func() (Target, int64, int64, bool) {
			t := big[rnd.IntN(len(big))]
			return t, direct.AlignDown(rnd.Int64N(t.Size - req + 1)), req, true
		}
	} else {
		// request k of a target starts at k*req; a target has as many
		// requests as start at least one aligned block before its end
		counts := make([]int64, len(ts))
		var total int64
		for i, t := range ts {
			if a := direct.AlignDown(t.Size); a > 0 {
				counts[i] = (a + req - 1) / req
			}
			total += counts[i]
		}
		if total == 0 {
			return nil, errors.New("measure: nothing to read: every target is smaller than one aligned block")
		}
		k := min(max(d.Start/req, 0), max(counts[0]-1, 0))
		n := int64(0) // requests given
		pick = func() (Target, int64, int64, bool) {
			if n == total && d.Duration <= 0 {
				return Target{}, 0, 0, false
			}
			n++
			j := k
			k = (k + 1) % total
			for i, c := range counts {
				if j < c {
					t, off := ts[i], j*req
					return t, off, min(req, direct.AlignDown(t.Size-off)), true
				}
				j -= c
			}
			panic("unreachable")
		}
	}
	return func() (Target, int64, int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if d.Limit > 0 && claimed >= d.Limit {
			return Target{}, 0, 0, false
		}
		t, off, n, ok := pick()
		claimed += n
		return t, off, n, ok
	}, nil
}

// The sequential reads LimitRuns measures: 64 MiB requests at queue depth 1
// and 2, and 256 MiB requests at depth 1 (the trunk reader asks for a whole
// layer run in one system call).
var limitReads = []DiskRead{{Request: 64 << 20, QD: 1}, {Request: 64 << 20, QD: 2}, {Request: 256 << 20, QD: 1}}

// LimitRuns measures what the files' disk gives sequential O_DIRECT reads
// into huge pages, in each of limitReads, with the page cache dropped
// before each, reading at most limit bytes each time. Which is fastest
// depends on the disk (docs/BENCHMARKS.md), so all are measured; the best
// is the limit a streaming benchmark is compared with.
func LimitRuns(ctx context.Context, paths []string, limit int64, when string) ([]DiskRun, error) {
	ts, err := OpenTargets(paths)
	if err != nil {
		return nil, err
	}
	defer ts.Close()
	var runs []DiskRun
	for _, d := range limitReads {
		DropCaches(ts.files()...)
		d.Limit, d.When = limit, when
		r, err := ReadDisk(ctx, ts, d)
		if err != nil {
			return runs, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func (ts Targets) files() []*direct.File {
	fs := make([]*direct.File, len(ts))
	for i, t := range ts {
		fs[i] = t.F
	}
	return fs
}

// CacheDrop says how far DropCaches could evict the page cache.
type CacheDrop struct {
	Advised bool // posix_fadvise(DONTNEED) accepted for every file
	Global  bool // sync + drop_caches (root only)
}

// How is what was done, in words ("" when nothing could be).
func (c CacheDrop) How() string {
	var how []string
	if c.Advised {
		how = append(how, "posix_fadvise(DONTNEED)")
	}
	if c.Global {
		how = append(how, "sync + drop_caches (root)")
	}
	return strings.Join(how, " and ")
}

// DropCaches evicts the files' pages from the page cache as far as this
// process may: each file is synced and advised DONTNEED, and as root every
// filesystem is synced and the whole page cache dropped. O_DIRECT reads
// bypass the page cache anyway; buffered ones, and a disk's own caches
// behind a freshly written file, do not.
func DropCaches(files ...*direct.File) CacheDrop {
	c := CacheDrop{Advised: len(files) > 0}
	for _, f := range files {
		_ = f.Sync()
		if f.DropCache() != nil {
			c.Advised = false
		}
	}
	if os.Geteuid() == 0 {
		syncAll()
		c.Global = os.WriteFile("/proc/sys/vm/drop_caches", []byte("1\n"), 0o200) == nil
	}
	return c
}

// dropPaths is DropCaches on files by name (the ones that do not open are
// skipped).
func dropPaths(paths []string) CacheDrop {
	var fs []*direct.File
	for _, p := range paths {
		if f, err := direct.Open(p); err == nil {
			fs = append(fs, f)
			defer f.Close()
		}
	}
	return DropCaches(fs...)
}

// ProbePrefix starts the name of every probe file WriteProbe creates.
const ProbePrefix = ".k3-doctor-probe"

// Probe describes the file WriteProbe writes.
type Probe struct {
	Size     int64         // bytes wanted (rounded down to whole WriteBlocks)
	MinSize  int64         // at least this much even when MaxTime has passed
	MaxTime  time.Duration // a slow disk stops here (and the probe is shorter)
	Progress func(frac float64)
}

// WriteBlock is the size of each write of a probe file.
const WriteBlock = 64 << 20

// WriteProbe writes a temporary probe file in dir with O_DIRECT from a
// huge-page buffer (every 4 KiB page distinct, so no compressing or
// deduplicating layer can shortcut it), fsyncs it and returns it open for
// reading, with the write speed in GB/s. The caller closes and removes it.
func WriteProbe(ctx context.Context, dir string, p Probe) (Target, float64, error) {
	size := p.Size &^ (WriteBlock - 1)
	if size <= 0 {
		return Target{}, 0, fmt.Errorf("measure: a probe file of %d bytes is less than one %d-byte write", p.Size, WriteBlock)
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d-%d", ProbePrefix, os.Getpid(), time.Now().UnixNano()))
	f, err := direct.Create(name)
	if err != nil {
		return Target{}, 0, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(name)
		}
	}()
	buf, err := direct.AllocHuge(WriteBlock)
	if err != nil {
		return Target{}, 0, err
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
			return Target{}, 0, err
		}
		for q := 0; q < len(b); q += direct.Align { // make every page unique
			binary.LittleEndian.PutUint64(b[q:], uint64(off)+uint64(q))
		}
		if _, err := f.WriteAt(b, off); err != nil {
			return Target{}, 0, err
		}
		off += int64(len(b))
		if p.Progress != nil {
			p.Progress(float64(off) / float64(size))
		}
		if time.Since(start) > p.MaxTime && off >= p.MinSize {
			break // slow disk: measure what was written
		}
	}
	if err := f.Sync(); err != nil {
		return Target{}, 0, err
	}
	ok = true
	return Target{f, off}, float64(off) / time.Since(start).Seconds() / 1e9, nil
}
