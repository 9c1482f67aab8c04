package trunk

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k3/storage/atomicfile"
	"k3/storage/direct"
	"k3/storage/safetensors"
	"k3/storage/units"

	"k3/storage/regfile"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// DefaultBufferSize is the size of Pack's read and write requests (and of
// each of its three huge-page buffers): large enough for the disk's
// ceiling, small next to an 8 GB budget.
const DefaultBufferSize = 64 << 20

// Options tune Pack.
type Options struct {
	// Force discards whatever the trunk directory holds (a trunk or an
	// interrupted pack of another checkpoint, a corrupt manifest, a
	// complete trunk) and packs from scratch.
	Force bool
	// BufferSize is the I/O request size in bytes (rounded up to 4096);
	// 0 means DefaultBufferSize. Pack holds three buffers of this size.
	BufferSize int
	// Progress, if set, is called as the pack advances (after every
	// written chunk and every finished run), from one goroutine at a time.
	Progress func(Progress)
}

// Progress phases.
const (
	PhaseCheck  = "check"  // re-verifying the runs an interrupted pack finished
	PhaseSource = "source" // comparing a complete trunk with a checkpoint modified since
	PhasePack   = "pack"   // gathering, writing and verifying runs
	PhaseDone   = "done"   // trunk.json written
)

// Progress reports how far a pack is.
type Progress struct {
	Phase     string
	Run       string // the run in flight (or just finished)
	RunsDone  int    // runs written and verified (kept runs included)
	RunsTotal int
	// BytesDone and BytesTotal count trunk.bin bytes: in PhasePack runs
	// done plus the part of the current run written; in PhaseCheck the
	// bytes re-verified out of those to re-verify.
	BytesDone, BytesTotal int64
	// BytesPerSec is this phase's rate over the last units.Window (bytes
	// done per second of wall time, verification included).
	BytesPerSec float64
	ETA         time.Duration // -1 when unknown
}

// Result summarises a Pack.
type Result struct {
	Manifest *Manifest // the trunk.json written (or found)
	UpToDate bool      // a complete trunk of this checkpoint existed: nothing was done
	Resumed  bool      // an interrupted pack was continued

	RunsWritten   int // runs written by this call
	RunsKept      int // runs of an interrupted pack re-verified and kept
	RunsRewritten int // runs of an interrupted pack whose CRC failed (rewritten)

	BytesWritten int64 // trunk.bin bytes written by this call
	BytesRead    int64 // checkpoint bytes read (alignment slack included)

	Elapsed    time.Duration // the whole call
	PackTime   time.Duration // wall time of the pack phase (read, write and verify of the runs written)
	ReadTime   time.Duration // time spent in checkpoint reads (overlapped with writes)
	WriteTime  time.Duration // time spent in trunk.bin writes
	VerifyTime time.Duration // time spent re-reading written runs
	CheckTime  time.Duration // time spent re-verifying kept runs
	SyncTime   time.Duration // final fsync

	DirectRead  bool     // checkpoint reads bypassed the page cache
	DirectWrite bool     // trunk.bin writes bypassed the page cache
	Notes       []string // I/O fallbacks, discarded partial state and the like
}

// ErrSourceMismatch is returned (wrapped, with the difference) when the
// trunk directory holds a trunk or partial pack of another checkpoint.
var ErrSourceMismatch = errors.New("the trunk directory holds a trunk of a different checkpoint")

// ErrRefused is returned (wrapped, with the reason) when the trunk
// directory holds a trunk.json Pack will not overwrite without
// Options.Force: a corrupt one, one of another layout, or one whose
// trunk.bin has the wrong size.
var ErrRefused = errors.New("refusing to overwrite the existing trunk")

// SpaceError is returned when the trunk's filesystem has too little room.
type SpaceError struct {
	Dir   string
	Need  int64 // more bytes needed
	Avail int64 // bytes available
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("not enough free space in %s: the trunk needs %d more bytes (%s), %d (%s) available",
		e.Dir, e.Need, units.Bytes(e.Need), e.Avail, units.Bytes(e.Avail))
}

// diskFree is direct.DiskFree, a variable so tests can simulate a full disk.
var diskFree = direct.DiskFree

// Plan opens the checkpoint in modelDir and returns the manifest Pack would
// write (CRCs zero), without writing anything.
func Plan(modelDir string) (*Manifest, error) {
	set, err := safetensors.Open(modelDir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	p, err := makePlan(set)
	if err != nil {
		return nil, err
	}
	return p.m, nil
}

// Pack packs the trunk of the checkpoint in modelDir into trunkDir (see the
// package documentation). A cancelled ctx stops it between chunks; what was
// finished stays recorded in trunk.partial.json and the next Pack resumes
// from there. The returned error wraps ctx.Err() on cancellation,
// ErrSourceMismatch for another checkpoint's trunk, *SpaceError when the
// disk is too small.
func Pack(ctx context.Context, modelDir, trunkDir string, opt Options) (*Result, error) {
	start := time.Now()
	bs := opt.BufferSize
	if bs <= 0 {
		bs = DefaultBufferSize
	}
	bs = int(alignUp(int64(bs), RunAlign))

	set, err := safetensors.Open(modelDir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	pl, err := makePlan(set)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(trunkDir, 0o755); err != nil {
		return nil, err
	}
	finalPath := filepath.Join(trunkDir, ManifestFile)
	partPath := filepath.Join(trunkDir, PartialFile)
	binPath := filepath.Join(trunkDir, BinFile)
	res := &Result{}

	// A complete trunk already there?
	if data, err := regfile.ReadFile(finalPath); err == nil {
		m, perr := ParseManifest(data)
		var refuse error
		switch {
		case perr != nil:
			refuse = fmt.Errorf("%s: existing manifest is invalid (%v)", finalPath, perr)
		case !sourceMatches(&m.Source, &pl.m.Source):
			_, why := sameSource(&m.Source, &pl.m.Source)
			refuse = fmt.Errorf("%w: %s: %s", ErrSourceMismatch, finalPath, why)
		case !sameLayout(m, pl.m):
			refuse = fmt.Errorf("%s: a trunk of this checkpoint with a different layout (packed by another k3 version?)", finalPath)
		default:
			fi, serr := os.Stat(binPath)
			if serr == nil && fi.Size() == m.TotalBytes {
				if !opt.Force {
					stale, err := keepIfSame(ctx, pl, m, bs, res, finalPath, opt.Progress)
					if err != nil {
						return nil, err
					}
					if stale == "" {
						res.UpToDate = true
						res.Elapsed = time.Since(start)
						return res, nil
					}
					refuse = fmt.Errorf("%w: %s", ErrSourceMismatch, stale)
				}
			} else if serr == nil {
				refuse = fmt.Errorf("%s is %d bytes but %s says %d", binPath, fi.Size(), finalPath, m.TotalBytes)
			} else {
				refuse = fmt.Errorf("%s is missing (%v) but %s exists", binPath, serr, finalPath)
			}
		}
		if refuse != nil && !opt.Force {
			if errors.Is(refuse, ErrSourceMismatch) {
				return nil, fmt.Errorf("%w; use --force to repack from scratch", refuse)
			}
			return nil, fmt.Errorf("%w: %w; use --force to repack from scratch", ErrRefused, refuse)
		}
		for _, p := range []string{finalPath, partPath, binPath} {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
		res.Notes = append(res.Notes, "discarded the existing trunk (--force)")
	} else if !os.IsNotExist(err) {
		return nil, err
	}

	// An interrupted pack to continue?
	done := map[string]uint32{}
	if data, err := regfile.ReadFile(partPath); err == nil {
		p, perr := parsePartial(data)
		discard := ""
		switch {
		case perr != nil:
			discard = fmt.Sprintf("%s is invalid (%v): starting over", partPath, perr)
		case !sourceMatches(&p.Source, &pl.m.Source):
			_, why := sameSource(&p.Source, &pl.m.Source)
			if !opt.Force {
				return nil, fmt.Errorf("%w: %s (an interrupted pack): %s; use --force to start over", ErrSourceMismatch, partPath, why)
			}
			discard = "discarded an interrupted pack of another checkpoint (--force)"
		case !sameLayout(&p.Manifest, pl.m):
			discard = fmt.Sprintf("%s has a different layout (another k3 version?): starting over", partPath)
		case opt.Force:
			discard = "discarded an interrupted pack (--force)"
		default:
			// runs gathered from a file modified since are packed again
			stale := pl.runsFrom(changedFiles(&p.Source, &pl.m.Source))
			dropped := 0
			for _, name := range p.Done {
				for i := range p.Runs {
					if p.Runs[i].Name != name {
						continue
					}
					if stale[i] {
						dropped++
					} else {
						done[name] = p.Runs[i].CRC32C
					}
				}
			}
			if dropped > 0 {
				res.Notes = append(res.Notes, fmt.Sprintf("%d run(s) of the interrupted pack came from files modified since: packing them again", dropped))
			}
			res.Resumed = true
		}
		if discard != "" {
			res.Notes = append(res.Notes, discard)
			if err := os.Remove(partPath); err != nil {
				return nil, err
			}
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if len(done) == 0 {
		res.Resumed = false
	}

	// Room for the rest?
	need := pl.m.TotalBytes - allocated(binPath) + 1<<20
	if avail, _, err := diskFree(trunkDir); err == nil && need > avail {
		return nil, &SpaceError{Dir: trunkDir, Need: need, Avail: avail}
	}

	of, err := openOut(binPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if of != nil {
			of.close()
		}
	}()
	if sz, err := of.size(); err != nil {
		return nil, err
	} else if sz > pl.m.TotalBytes {
		if err := of.f.Truncate(pl.m.TotalBytes); err != nil {
			return nil, err
		}
	}
	if err := preallocate(of.f, pl.m.TotalBytes); err != nil {
		return nil, fmt.Errorf("reserve %d bytes for %s: %w", pl.m.TotalBytes, binPath, err)
	}
	rd, err := direct.Open(binPath)
	if err != nil {
		return nil, err
	}
	defer rd.Close()

	pk := &packer{pl: pl, bs: bs, of: of, rd: rd, res: res}
	defer pk.free()
	if err := pk.alloc(); err != nil {
		return nil, err
	}
	prog := &progress{fn: opt.Progress, runsTotal: len(pl.m.Runs)}
	save := func() error { return pk.savePartial(partPath, done) }
	if err := save(); err != nil {
		return nil, err
	}

	// Re-verify what an interrupted pack finished.
	if len(done) > 0 {
		t0 := time.Now()
		var total int64
		for i := range pl.m.Runs {
			if _, ok := done[pl.m.Runs[i].Name]; ok {
				total += pl.m.Runs[i].Length
			}
		}
		prog.begin(PhaseCheck, 0, total)
		for i := range pl.m.Runs {
			r := &pl.m.Runs[i]
			want, ok := done[r.Name]
			if !ok {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("pack interrupted: %w", err)
			}
			got, err := crcRun(rd, r, pk.stage[0].Cap()[:bs], func(n int64) { prog.add(r.Name, n) })
			if err != nil {
				return nil, err
			}
			if got != want {
				delete(done, r.Name)
				res.RunsRewritten++
				res.Notes = append(res.Notes, fmt.Sprintf("run %s of the interrupted pack failed its CRC (%08x, want %08x): rewriting it", r.Name, got, want))
			} else {
				res.RunsKept++
				prog.runsDone++
				prog.emit(r.Name)
			}
		}
		res.CheckTime = time.Since(t0)
		if err := save(); err != nil {
			return nil, err
		}
	}

	// Pack the rest.
	t0 := time.Now()
	var kept int64
	for i := range pl.m.Runs {
		if _, ok := done[pl.m.Runs[i].Name]; ok {
			kept += pl.m.Runs[i].Length
		}
	}
	prog.begin(PhasePack, kept, pl.m.TotalBytes)
	prog.runsDone = len(done)
	prog.emit("")
	for i := range pl.m.Runs {
		r := &pl.m.Runs[i]
		if _, ok := done[r.Name]; ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("pack interrupted: %w", err)
		}
		crc, err := pk.writeRun(ctx, i, func(n int64) { prog.add(r.Name, n) })
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("pack interrupted in run %s: %w", r.Name, ctx.Err())
			}
			return nil, err
		}
		tv := time.Now()
		if !of.direct {
			// Make the re-read come from the device, not the page cache.
			if err := of.sync(); err != nil {
				return nil, err
			}
			_ = rd.DropCache()
		}
		got, err := crcRun(rd, r, pk.stage[0].Cap()[:bs], nil)
		res.VerifyTime += time.Since(tv)
		if err != nil {
			return nil, err
		}
		if got != crc {
			return nil, fmt.Errorf("run %s: re-reading %s gives CRC-32C %08x, %08x was written (the disk lost or corrupted a write)", r.Name, binPath, got, crc)
		}
		done[r.Name] = crc
		res.RunsWritten++
		if err := save(); err != nil {
			return nil, err
		}
		prog.runsDone++
		prog.emit(r.Name)
	}
	res.PackTime = time.Since(t0)

	ts := time.Now()
	if err := of.sync(); err != nil {
		return nil, err
	}
	res.SyncTime = time.Since(ts)
	res.DirectWrite = of.direct
	if of.note != "" {
		res.Notes = append(res.Notes, of.note)
	}
	err = of.close()
	of = nil
	if err != nil {
		return nil, err
	}
	m := pk.manifest(done)
	data, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteDurable(finalPath, data); err != nil {
		return nil, err
	}
	if err := os.Remove(partPath); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	res.Manifest = m
	res.Elapsed = time.Since(start)
	prog.phase = PhaseDone
	prog.emit("")
	return res, nil
}

func sourceMatches(a, b *Source) bool {
	ok, _ := sameSource(a, b)
	return ok
}

// packer holds the buffers and descriptors of one Pack.
type packer struct {
	pl    *plan
	bs    int
	of    *outFile
	rd    *direct.File
	res   *Result
	rbuf  *direct.Buffer
	stage [2]*direct.Buffer
	src   []*direct.File
	sizes []int64
}

func (p *packer) alloc() error {
	var err error
	if p.rbuf, err = direct.AllocHuge(p.bs); err != nil {
		return err
	}
	for i := range p.stage {
		if p.stage[i], err = direct.AllocHuge(p.bs); err != nil {
			return err
		}
	}
	p.src = make([]*direct.File, len(p.pl.paths))
	p.sizes = make([]int64, len(p.pl.paths))
	return nil
}

func (p *packer) free() {
	p.rbuf.Free()
	for _, b := range p.stage {
		b.Free()
	}
	for _, f := range p.src {
		if f != nil {
			f.Close()
		}
	}
}

// source opens shard i on first use.
func (p *packer) source(i int) (*direct.File, int64, error) {
	if p.src[i] == nil {
		f, err := direct.Open(p.pl.paths[i])
		if err != nil {
			return nil, 0, err
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		p.src[i], p.sizes[i] = f, size
		if f.Direct() {
			p.res.DirectRead = true
		} else if n := f.Note(); n != "" && !contains(p.res.Notes, n) {
			p.res.Notes = append(p.res.Notes, n)
		}
	}
	return p.src[i], p.sizes[i], nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// manifest returns the plan's manifest with the CRCs of done runs.
func (p *packer) manifest(done map[string]uint32) *Manifest {
	m := *p.pl.m
	m.Runs = make([]Run, len(p.pl.m.Runs))
	copy(m.Runs, p.pl.m.Runs)
	for i := range m.Runs {
		m.Runs[i].CRC32C = done[m.Runs[i].Name]
	}
	return &m
}

func (p *packer) savePartial(path string, done map[string]uint32) error {
	pt := partial{Manifest: *p.manifest(done), Done: []string{}}
	for _, r := range pt.Runs {
		if _, ok := done[r.Name]; ok {
			pt.Done = append(pt.Done, r.Name)
		}
	}
	data, err := pt.marshal()
	if err != nil {
		return err
	}
	// Not fsynced (an fsync per run cost ~45 ms on the development
	// machines): a partial file lost or emptied by a crash only costs the
	// progress it recorded, and a run it lists whose data did not reach the
	// disk fails its CRC on resume and is rewritten.
	return atomicfile.WriteNoSync(path, data)
}

type chunk struct {
	buf []byte
	off int64 // relative to the run start
}

// writeRun gathers run i from the checkpoint and writes it to trunk.bin:
// this goroutine reads and assembles chunks of bs bytes, a second one
// writes them, so reads and writes overlap. It returns the CRC of the
// bytes written; onChunk is called (from the writer goroutine) with each
// chunk's length once written.
func (p *packer) writeRun(ctx context.Context, i int, onChunk func(int64)) (uint32, error) {
	r := &p.pl.m.Runs[i]
	return p.gatherRun(ctx, i, func(b []byte, off int64) error {
		t0 := time.Now()
		err := p.of.writeAt(b, r.Offset+off)
		p.res.WriteTime += time.Since(t0)
		if err == nil {
			p.res.BytesWritten += int64(len(b))
		}
		return err
	}, onChunk)
}

// gatherRun streams run i's bytes from the checkpoint to sink (nil: none)
// in a second goroutine and returns their CRC-32C.
func (p *packer) gatherRun(ctx context.Context, i int, sink func(b []byte, off int64) error, onChunk func(int64)) (uint32, error) {
	r := &p.pl.m.Runs[i]
	free := make(chan []byte, len(p.stage))
	full := make(chan chunk, len(p.stage))
	for _, b := range p.stage {
		free <- b.Cap()[:p.bs:p.bs]
	}
	var failed atomic.Bool
	var werr error
	var crc uint32
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		for c := range full {
			if werr == nil {
				var err error
				if sink != nil {
					err = sink(c.buf, c.off)
				}
				if err != nil {
					werr = err
					failed.Store(true)
				} else {
					crc = crc32.Update(crc, castagnoli, c.buf)
					if onChunk != nil {
						onChunk(int64(len(c.buf)))
					}
				}
			}
			free <- c.buf[:cap(c.buf)]
		}
	}()
	ferr := p.fill(ctx, r, p.pl.src[i], free, full, &failed)
	close(full)
	<-wdone
	if werr != nil {
		return 0, werr
	}
	return crc, ferr
}

// fill streams run r's bytes as chunks of bs bytes (the last one shorter,
// all multiples of 4096) into full, taking buffers from free.
func (p *packer) fill(ctx context.Context, r *Run, src []*safetensors.Tensor, free chan []byte, full chan chunk, failed *atomic.Bool) error {
	bs := int64(p.bs)
	var cur []byte
	var win int64    // run offset of cur[0]
	var filled int64 // run offset up to which cur has been written
	acquire := func() {
		cur = <-free
		filled = win
	}
	// pad zeroes cur from filled up to run offset to (only the gaps between
	// tensors and the tail are zeroed: clearing whole buffers cost more
	// CPU than the copies).
	pad := func(to int64) {
		clear(cur[filled-win : to-win])
		filled = to
	}
	// emit copies data to run offset pos (non-decreasing across calls).
	emit := func(pos int64, data []byte) {
		for len(data) > 0 {
			if cur == nil {
				acquire()
			}
			for pos >= win+bs {
				pad(win + bs)
				full <- chunk{cur, win}
				win += bs
				acquire()
			}
			pad(pos)
			n := copy(cur[pos-win:], data)
			data = data[n:]
			pos += int64(n)
			filled = pos
		}
	}
	rb := p.rbuf.Cap()[:p.bs]
	for k := 0; k < len(src); {
		// An extent: tensors adjacent in one shard.
		e := k + 1
		for e < len(src) && src[e].Path == src[k].Path && src[e].Offset == src[e-1].Offset+src[e-1].Size {
			e++
		}
		fi := p.pl.fileIdx[src[k].Path]
		f, size, err := p.source(fi)
		if err != nil {
			return err
		}
		start, end := src[k].Offset, src[e-1].Offset+src[e-1].Size
		t := k
		for pos := start; pos < end; {
			if err := ctx.Err(); err != nil {
				return err
			}
			if failed.Load() {
				return nil // the writer's error is reported
			}
			lo := direct.AlignDown(pos)
			hi := min(lo+bs, direct.AlignUp(end), size)
			if hi <= pos {
				return fmt.Errorf("%s: tensor data ends past the file's %d bytes", src[k].Path, size)
			}
			if err := p.readSource(f, rb[:hi-lo], lo); err != nil {
				return err
			}
			stop := min(hi, end)
			for t < e {
				ts := src[t]
				a, b := max(pos, ts.Offset), min(stop, ts.Offset+ts.Size)
				if a < b {
					emit(r.Tensors[t].Offset+(a-ts.Offset), rb[a-lo:b-lo])
				}
				if ts.Offset+ts.Size > stop {
					break
				}
				t++
			}
			pos = stop
		}
		k = e
	}
	// Flush through the end of the run (zero padding included).
	for win < r.Length {
		if cur == nil {
			acquire()
		}
		n := min(bs, r.Length-win)
		pad(win + n)
		full <- chunk{cur[:n], win}
		win += n
		cur = nil
	}
	return nil
}

// readSource fills buf from f at off (off and buf 4096-aligned): the
// aligned part straight from the device, a tail that ends at an unaligned
// end of file through the direct package's bounce buffer.
func (p *packer) readSource(f *direct.File, buf []byte, off int64) error {
	t0 := time.Now()
	defer func() { p.res.ReadTime += time.Since(t0) }()
	n := len(buf) &^ (RunAlign - 1)
	if n > 0 {
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return err
		}
	}
	if n < len(buf) {
		if _, err := f.ReadAt(buf[n:], off+int64(n)); err != nil {
			return err
		}
	}
	p.res.BytesRead += int64(len(buf))
	return nil
}

// crcRun reads run r from f in chunks of len(buf) bytes and returns the
// CRC-32C of its Length bytes; onChunk (if set) gets each chunk's length.
func crcRun(f *direct.File, r *Run, buf []byte, onChunk func(int64)) (uint32, error) {
	var crc uint32
	for off := int64(0); off < r.Length; {
		n := min(int64(len(buf)), r.Length-off)
		if _, err := f.ReadAt(buf[:n], r.Offset+off); err != nil {
			return 0, fmt.Errorf("run %s: %w", r.Name, err)
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += n
		if onChunk != nil {
			onChunk(n)
		}
	}
	return crc, nil
}

// progress turns counters into Progress reports.
type progress struct {
	fn                    func(Progress)
	phase                 string
	runsDone, runsTotal   int
	bytesDone, bytesTotal int64
	meter                 units.Meter // bytesDone in this phase
}

func (s *progress) begin(phase string, done, total int64) {
	s.phase, s.bytesDone, s.bytesTotal = phase, done, total
	s.meter.Reset()
	s.meter.Observe(time.Now(), done)
}

func (s *progress) add(run string, n int64) {
	s.bytesDone += n
	s.emit(run)
}

func (s *progress) emit(run string) {
	if s.fn == nil {
		return
	}
	now := time.Now()
	s.meter.Observe(now, s.bytesDone)
	p := Progress{Phase: s.phase, Run: run, RunsDone: s.runsDone, RunsTotal: s.runsTotal,
		BytesDone: s.bytesDone, BytesTotal: s.bytesTotal, BytesPerSec: s.meter.Rate(now)}
	p.ETA = units.ETA(s.bytesTotal-s.bytesDone, p.BytesPerSec)
	if s.phase == PhaseDone {
		p.ETA = 0
	}
	s.fn(p)
}

// keepIfSame decides about a complete trunk m whose layout matches the
// checkpoint: when a source file was modified since it was packed (or m
// is version 1, which has no times), the runs gathered from those files
// are gathered again and their CRC-32C compared with m's. All equal: m is
// kept, trunk.json rewritten with the checkpoint's current identity, and
// "" returned. Otherwise the answer names the changed file and run.
func keepIfSame(ctx context.Context, pl *plan, m *Manifest, bs int, res *Result, finalPath string, onProgress func(Progress)) (string, error) {
	changed := changedFiles(&m.Source, &pl.m.Source)
	res.Manifest = m
	if len(changed) == 0 && m.Version == Version {
		return "", nil
	}
	which := pl.runsFrom(changed)
	pk := &packer{pl: pl, bs: bs, res: res}
	defer pk.free()
	if err := pk.alloc(); err != nil {
		return "", err
	}
	var total int64
	n := 0
	for i := range pl.m.Runs {
		if which[i] {
			total += pl.m.Runs[i].Length
			n++
		}
	}
	prog := &progress{fn: onProgress, runsTotal: n}
	prog.begin(PhaseSource, 0, total)
	t0 := time.Now()
	for i := range pl.m.Runs {
		if !which[i] {
			continue
		}
		r := &pl.m.Runs[i]
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("pack interrupted: %w", err)
		}
		got, err := pk.gatherRun(ctx, i, nil, func(n int64) { prog.add(r.Name, n) })
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("pack interrupted: %w", ctx.Err())
			}
			return "", err
		}
		if want := m.Runs[i].CRC32C; got != want {
			var names []string
			for _, fi := range pl.filesOf(i) {
				if slices.Contains(changed, fi) {
					names = append(names, pl.m.Source.Files[fi].Name)
				}
			}
			return fmt.Sprintf("%s changed after the trunk in %s was packed: run %s gathered from it now has CRC-32C %08x, the packed one %08x (another version of the weights); use --force to repack from scratch",
				strings.Join(names, ", "), filepath.Dir(finalPath), r.Name, got, want), nil
		}
		prog.runsDone++
		prog.emit(r.Name)
	}
	res.CheckTime = time.Since(t0)
	kept := *pl.m
	kept.Runs = slices.Clone(pl.m.Runs)
	for i := range kept.Runs {
		kept.Runs[i].CRC32C = m.Runs[i].CRC32C
	}
	data, err := kept.Marshal()
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteDurable(finalPath, data); err != nil {
		return "", err
	}
	res.Manifest = &kept
	why := "the checkpoint's files were modified since the pack"
	if m.Version == legacyVersion {
		why = "trunk.json was written by an older k3"
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d run(s) gathered again from the checkpoint match the packed ones; trunk.json now records the checkpoint's identity (trunk.bin unchanged)", why, n))
	return "", nil
}
