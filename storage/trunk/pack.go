package trunk

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"k3/kernels"
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
	// complete trunk, one packed with the other Compress setting) and
	// packs from scratch.
	Force bool
	// Compress stores the matrices the engine can read compressed
	// (Compressible) in the lossless BF16C form: a smaller trunk.bin that
	// gives bit-identical output. A trunk directory holding the other kind
	// (complete or interrupted) is refused unless Force.
	Compress bool
	// BufferSize is the I/O request size in bytes (rounded up to 4096);
	// 0 means DefaultBufferSize. Pack holds three buffers of this size.
	BufferSize int
	// Layers packs only the first Layers layers (0: all), as `k3 run
	// --layers N` binds them: what a partial shard set (k3 download
	// --layers N) can give.
	Layers int
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
	// done plus the part of the current run written (with compression:
	// the bytes of the uncompressed trunk, as the compressed size is known
	// only at the end); in PhaseCheck and PhaseSource the bytes re-read
	// out of those to re-read.
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
	// UncompressedBytes is the size of trunk.bin packed without
	// compression (Manifest.TotalBytes when it is not compressed).
	UncompressedBytes int64

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

// Plan opens the checkpoint in modelDir and returns the manifest Pack
// without compression would write (CRCs zero), without writing anything.
// (With compression the sizes and places are known only once packed.)
func Plan(modelDir string) (*Manifest, error) { return PlanLayers(modelDir, 0) }

// PlanLayers is Plan for the first `layers` layers (0: all), as Pack with
// Options.Layers: a partial shard set is accepted when it holds them.
func PlanLayers(modelDir string, layers int) (*Manifest, error) {
	set, err := safetensors.OpenPartial(modelDir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	if err := CheckPartial(set, layers); err != nil {
		return nil, err
	}
	p, err := makePlan(set, layers)
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

	set, err := safetensors.OpenPartial(modelDir)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	if err := CheckPartial(set, opt.Layers); err != nil {
		return nil, err
	}
	pl, err := makePlan(set, opt.Layers)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(trunkDir, 0o755); err != nil {
		return nil, err
	}
	p := &packer{pl: pl, bs: bs, opt: opt, dir: trunkDir, res: &Result{UncompressedBytes: pl.m.TotalBytes},
		finalPath: filepath.Join(trunkDir, ManifestFile), partPath: filepath.Join(trunkDir, PartialFile),
		binPath: filepath.Join(trunkDir, BinFile), done: map[string]uint32{}}
	defer p.close()

	if upToDate, err := p.keepExisting(ctx); err != nil {
		return nil, err
	} else if upToDate {
		p.res.UpToDate = true
		p.res.Elapsed = time.Since(start)
		return p.res, nil
	}
	for _, phase := range []func(context.Context) error{p.resume, p.reserveSpace, p.openFiles, p.reverify, p.packRuns, p.finish} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	p.res.Elapsed = time.Since(start)
	p.prog.phase = PhaseDone
	p.prog.emit("")
	return p.res, nil
}

// other says how to keep a trunk of the other kind instead of replacing
// it.
func (p *packer) other() string {
	if p.opt.Compress {
		return "pack without --compress to keep it"
	}
	return "pack with --compress to keep it"
}

// note records what a phase decided, for Result.Notes.
func (p *packer) note(format string, args ...any) {
	p.res.Notes = append(p.res.Notes, fmt.Sprintf(format, args...))
}

// keepExisting decides about a complete trunk already in the folder: the
// same checkpoint's, whole and with every run's CRC right, is kept
// (upToDate); with Options.Force any other is removed; without it, one of
// another checkpoint, kind or layout is refused.
func (p *packer) keepExisting(ctx context.Context) (upToDate bool, err error) {
	data, err := regfile.ReadFile(p.finalPath)
	if os.IsNotExist(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	m, perr := ParseManifest(data)
	var refuse error
	switch {
	case perr != nil:
		refuse = fmt.Errorf("%s: existing manifest is invalid (%v)", p.finalPath, perr)
	case !sourceMatches(&m.Source, &p.pl.m.Source):
		_, why := sameSource(&m.Source, &p.pl.m.Source)
		refuse = fmt.Errorf("%w: %s: %s", ErrSourceMismatch, p.finalPath, why)
	case planDiff(m, p.pl.m) != "":
		refuse = fmt.Errorf("%s: a trunk of this checkpoint with a different layout (packed by another k3 version?)", p.finalPath)
	case m.Compressed() != p.opt.Compress:
		refuse = fmt.Errorf("%s holds %s trunk of this checkpoint and this pack would write %s one (%s)",
			p.dir, aKind(m.Compressed()), aKind(p.opt.Compress), p.other())
	default:
		fi, serr := os.Stat(p.binPath)
		if serr == nil && fi.Size() == m.TotalBytes {
			if !p.opt.Force {
				stale, err := keepIfSame(ctx, p.pl, m, p.bs, p.res, p.finalPath, p.opt.Progress)
				if err != nil {
					return false, err
				}
				if stale == "" {
					return true, nil
				}
				refuse = fmt.Errorf("%w: %s", ErrSourceMismatch, stale)
			}
		} else if serr == nil {
			refuse = fmt.Errorf("%s is %d bytes but %s says %d", p.binPath, fi.Size(), p.finalPath, m.TotalBytes)
		} else {
			refuse = fmt.Errorf("%s is missing (%v) but %s exists", p.binPath, serr, p.finalPath)
		}
	}
	if refuse != nil && !p.opt.Force {
		if errors.Is(refuse, ErrSourceMismatch) {
			return false, fmt.Errorf("%w; use --force to repack from scratch", refuse)
		}
		return false, fmt.Errorf("%w: %w; use --force to repack from scratch", ErrRefused, refuse)
	}
	for _, f := range []string{p.finalPath, p.partPath, p.binPath} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return false, err
		}
	}
	p.note("discarded the existing trunk (--force)")
	return false, nil
}

// resume decides about an interrupted pack and sets what is written:
// p.m is the plan, or with compression the compressed plan, whose runs
// after the last one written are placed provisionally (at their largest);
// p.done holds the runs an interrupted pack of the same checkpoint
// finished (their CRCs), those gathered from files modified since left out.
func (p *packer) resume(context.Context) error {
	p.m = p.pl.m
	if p.opt.Compress {
		p.m = compressedPlan(p.pl.m)
	}
	data, err := regfile.ReadFile(p.partPath)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return err
	}
	pp, perr := parsePartial(data)
	discard := ""
	switch {
	case perr != nil:
		discard = fmt.Sprintf("%s is invalid (%v): starting over", p.partPath, perr)
	case !sourceMatches(&pp.Source, &p.pl.m.Source):
		_, why := sameSource(&pp.Source, &p.pl.m.Source)
		if !p.opt.Force {
			return fmt.Errorf("%w: %s (an interrupted pack): %s; use --force to start over", ErrSourceMismatch, p.partPath, why)
		}
		discard = "discarded an interrupted pack of another checkpoint (--force)"
	case pp.Compressed() != p.opt.Compress:
		if !p.opt.Force {
			return fmt.Errorf("%w: %s holds an interrupted %s pack of this checkpoint and this pack would write %s trunk (%s, which resumes it); use --force to start over",
				ErrRefused, p.dir, kindName(pp.Compressed()), aKind(p.opt.Compress), strings.Replace(p.other(), "keep", "finish", 1))
		}
		discard = fmt.Sprintf("discarded an interrupted %s pack (--force)", kindName(pp.Compressed()))
	case planDiff(&pp.Manifest, p.pl.m) != "":
		discard = fmt.Sprintf("%s has a different layout (another k3 version?): starting over", p.partPath)
	case p.opt.Force:
		discard = "discarded an interrupted pack (--force)"
	default:
		p.keepDone(pp)
	}
	if discard != "" {
		p.note("%s", discard)
		return os.Remove(p.partPath)
	}
	return nil
}

// keepDone takes the runs an interrupted pack finished into p.done, but
// those gathered from a file modified since; with compression, only the
// runs before the first one to pack again keep their place.
func (p *packer) keepDone(pp *partial) {
	stale := p.pl.runsFrom(changedFiles(&pp.Source, &p.pl.m.Source))
	dropped := 0
	for _, name := range pp.Done {
		for i := range pp.Runs {
			if pp.Runs[i].Name != name {
				continue
			}
			if stale[i] {
				dropped++
			} else {
				p.done[name] = pp.Runs[i].CRC32C
			}
		}
	}
	if dropped > 0 {
		p.note("%d run(s) of the interrupted pack came from files modified since: packing them again", dropped)
	}
	if p.opt.Compress {
		// a compressed run's place depends on the sizes before it: keep
		// the runs done before the first one to pack again
		k := 0
		for k < len(p.m.Runs) {
			if _, ok := p.done[p.m.Runs[k].Name]; !ok {
				break
			}
			p.m.Runs[k] = cloneRun(&pp.Runs[k])
			k++
		}
		if n := dropAfter(p.m, p.done, k); n > 0 {
			p.note("%d later run(s) of the interrupted pack are packed again (a compressed trunk is written in order)", n)
		}
		relayout(p.m, k)
	}
	p.res.Resumed = len(p.done) > 0
}

// reserveSpace refuses a disk without room for the rest. (With compression
// the uncompressed size counts: the compressed one is known only at the
// end, and is smaller unless the weights do not compress at all.)
func (p *packer) reserveSpace(context.Context) error {
	need := p.pl.m.TotalBytes - allocated(p.binPath) + 1<<20
	if avail, _, err := diskFree(p.dir); err == nil && need > avail {
		return &SpaceError{Dir: p.dir, Need: need, Avail: avail}
	}
	return nil
}

// openFiles opens trunk.bin for writing (preallocated, when not
// compressed: a compressed trunk.bin grows as it is written and is cut to
// its size at the end) and for reading back, allocates the buffers and
// records the pack's start in trunk.partial.json.
func (p *packer) openFiles(context.Context) error {
	var err error
	if p.of, err = openOut(p.binPath); err != nil {
		return err
	}
	if !p.opt.Compress {
		if sz, err := p.of.size(); err != nil {
			return err
		} else if sz > p.pl.m.TotalBytes {
			if err := p.of.f.Truncate(p.pl.m.TotalBytes); err != nil {
				return err
			}
		}
		if err := preallocate(p.of.f, p.pl.m.TotalBytes); err != nil {
			return fmt.Errorf("reserve %d bytes for %s: %w", p.pl.m.TotalBytes, p.binPath, err)
		}
	}
	if p.rd, err = direct.Open(p.binPath); err != nil {
		return err
	}
	if err := p.alloc(); err != nil {
		return err
	}
	p.prog = &progress{fn: p.opt.Progress, runsTotal: len(p.pl.m.Runs)}
	return p.save()
}

// save records the runs done so far in trunk.partial.json.
func (p *packer) save() error { return p.savePartial(p.partPath, p.done) }

// reverify reads back what an interrupted pack finished: a run whose CRC
// no longer matches is written again (with compression, the runs after it
// too).
func (p *packer) reverify(ctx context.Context) error {
	if len(p.done) == 0 {
		return nil
	}
	t0 := time.Now()
	var total int64
	for i := range p.m.Runs {
		if _, ok := p.done[p.m.Runs[i].Name]; ok {
			total += p.m.Runs[i].Length
		}
	}
	p.prog.begin(PhaseCheck, 0, total)
	for i := range p.m.Runs {
		r := &p.m.Runs[i]
		want, ok := p.done[r.Name]
		if !ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pack interrupted: %w", err)
		}
		got, err := crcRun(p.rd, r, p.stage[0].Cap()[:p.bs], func(n int64) { p.prog.add(r.Name, n) })
		if err != nil {
			return err
		}
		if got != want {
			delete(p.done, r.Name)
			p.res.RunsRewritten++
			p.note("run %s of the interrupted pack failed its CRC (%08x, want %08x): rewriting it", r.Name, got, want)
			if p.opt.Compress {
				if n := dropAfter(p.m, p.done, i+1); n > 0 {
					p.note("the %d run(s) after it are packed again too (a compressed trunk is written in order)", n)
				}
				relayout(p.m, i)
			}
		} else {
			p.res.RunsKept++
			p.prog.runsDone++
			p.prog.emit(r.Name)
		}
	}
	p.res.CheckTime = time.Since(t0)
	return p.save()
}

// packRuns writes every run not done yet, reads each back and compares its
// CRC, and records it in trunk.partial.json.
func (p *packer) packRuns(ctx context.Context) error {
	t0 := time.Now()
	var kept int64
	for i := range p.pl.m.Runs {
		if _, ok := p.done[p.pl.m.Runs[i].Name]; ok {
			kept += p.pl.m.Runs[i].Length // uncompressed: see Progress
		}
	}
	p.prog.begin(PhasePack, kept, p.pl.m.TotalBytes)
	p.prog.runsDone = len(p.done)
	p.prog.emit("")
	for i := range p.m.Runs {
		r := &p.m.Runs[i]
		if _, ok := p.done[r.Name]; ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pack interrupted: %w", err)
		}
		crc, err := p.writeRun(ctx, i, func(n int64) { p.prog.add(r.Name, n) })
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("pack interrupted in run %s: %w", r.Name, ctx.Err())
			}
			return err
		}
		tv := time.Now()
		if !p.of.direct {
			// Make the re-read come from the device, not the page cache.
			if err := p.of.sync(); err != nil {
				return err
			}
			_ = p.rd.DropCache()
		}
		got, err := crcRun(p.rd, r, p.stage[0].Cap()[:p.bs], nil)
		p.res.VerifyTime += time.Since(tv)
		if err != nil {
			return err
		}
		if got != crc {
			return fmt.Errorf("run %s: re-reading %s gives CRC-32C %08x, %08x was written (the disk lost or corrupted a write)", r.Name, p.binPath, got, crc)
		}
		p.done[r.Name] = crc
		p.res.RunsWritten++
		if p.opt.Compress {
			relayout(p.m, i+1)
		}
		if err := p.save(); err != nil {
			return err
		}
		p.prog.runsDone++
		p.prog.emit(r.Name)
	}
	p.res.PackTime = time.Since(t0)
	return nil
}

// finish cuts a compressed trunk.bin to its size, syncs and closes it,
// writes trunk.json durably and removes trunk.partial.json.
func (p *packer) finish(context.Context) error {
	if p.opt.Compress {
		if err := p.of.f.Truncate(p.m.TotalBytes); err != nil {
			return err
		}
	}
	ts := time.Now()
	if err := p.of.sync(); err != nil {
		return err
	}
	p.res.SyncTime = time.Since(ts)
	p.res.DirectWrite = p.of.direct
	if p.of.note != "" {
		p.note("%s", p.of.note)
	}
	err := p.of.close()
	p.of = nil
	if err != nil {
		return err
	}
	m := p.manifest(p.done)
	data, err := m.Marshal()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteDurable(p.finalPath, data); err != nil {
		return err
	}
	if err := os.Remove(p.partPath); err != nil && !os.IsNotExist(err) {
		return err
	}
	p.res.Manifest = m
	return nil
}

// close releases what the phases opened (after an error too).
func (p *packer) close() {
	if p.of != nil {
		p.of.close()
	}
	if p.rd != nil {
		p.rd.Close()
		p.free() // the buffers are allocated after rd is opened
	}
}

func sourceMatches(a, b *Source) bool {
	ok, _ := sameSource(a, b)
	return ok
}

// packer is one Pack: its phases are its methods (keepExisting, resume,
// reserveSpace, openFiles, reverify, packRuns, finish), run in that order.
type packer struct {
	pl   *plan
	m    *Manifest // what is written: pl.m, or its compressed form
	bs   int
	opt  Options
	dir  string
	done map[string]uint32 // runs written and verified: their CRC-32C
	of   *outFile
	rd   *direct.File
	res  *Result
	prog *progress

	finalPath, partPath, binPath string
	rbuf                         *direct.Buffer
	stage                        [2]*direct.Buffer
	src                          []*direct.File
	sizes                        []int64
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
		} else if n := f.Note(); n != "" && !slices.Contains(p.res.Notes, n) {
			p.res.Notes = append(p.res.Notes, n)
		}
	}
	return p.src[i], p.sizes[i], nil
}

// manifest returns the manifest being written with the CRCs of done runs.
func (p *packer) manifest(done map[string]uint32) *Manifest {
	m := *p.m
	m.Runs = make([]Run, len(p.m.Runs))
	for i := range m.Runs {
		m.Runs[i] = cloneRun(&p.m.Runs[i])
		m.Runs[i].CRC32C = done[m.Runs[i].Name]
	}
	return &m
}

func cloneRun(r *Run) Run {
	c := *r
	c.Tensors = slices.Clone(r.Tensors)
	return c
}

func sameTensors(a, b []Tensor) bool {
	return slices.EqualFunc(a, b, func(x, y Tensor) bool {
		return x.Name == y.Name && x.DType == y.DType && slices.Equal(x.Shape, y.Shape) && x.Offset == y.Offset && x.Size == y.Size
	})
}

// dropAfter forgets that the runs from..end of m are done and returns how
// many were.
func dropAfter(m *Manifest, done map[string]uint32, from int) int {
	n := 0
	for i := from; i < len(m.Runs); i++ {
		if _, ok := done[m.Runs[i].Name]; ok {
			delete(done, m.Runs[i].Name)
			n++
		}
	}
	return n
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
	buf  []byte
	off  int64 // relative to the run start
	prog int64 // progress it stands for (see Progress.BytesDone)
}

// writeRun gathers run i of p.m from the checkpoint and writes it to
// trunk.bin: this goroutine reads and assembles chunks of bs bytes, a
// second one writes them, so reads and writes overlap. With compression
// the run's tensor places and sizes are set as it is assembled, and the
// row offsets of compressed tensors whose chunk had gone to disk are
// written last. It returns the CRC of the run as written; onChunk is
// called (from the writer goroutine) with each chunk's progress.
func (p *packer) writeRun(ctx context.Context, i int, onChunk func(int64)) (uint32, error) {
	r := &p.m.Runs[i]
	crc, patches, err := p.gatherRun(ctx, r, p.pl.src[i], p.pl.m.Runs[i].Length, func(b []byte, off int64) error {
		t0 := time.Now()
		err := p.of.writeAt(b, r.Offset+off)
		p.res.WriteTime += time.Since(t0)
		if err == nil {
			p.res.BytesWritten += int64(len(b))
		}
		return err
	}, onChunk)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	defer func() { p.res.WriteTime += time.Since(t0) }()
	for _, pt := range patches {
		if err := p.patchFile(r, pt); err != nil {
			return 0, err
		}
	}
	return crc, nil
}

// patchFile writes pt into run r of trunk.bin, rewriting the whole pages
// it touches (read back from the file, as O_DIRECT writes whole pages).
func (p *packer) patchFile(r *Run, pt patch) error {
	buf := p.stage[0].Cap()[:p.bs]
	start := r.Offset + pt.off
	end := start + int64(len(pt.data))
	for a := direct.AlignDown(start); a < end; {
		b := buf[:min(int64(len(buf)), direct.AlignUp(end)-a)]
		if err := p.of.readAt(b, a); err != nil {
			return err
		}
		lo, hi := max(a, start), min(a+int64(len(b)), end)
		copy(b[lo-a:hi-a], pt.data[lo-start:])
		if err := p.of.writeAt(b, a); err != nil {
			return err
		}
		a += int64(len(b))
	}
	return nil
}

// gatherRun assembles run r (tensors src; logical its uncompressed
// length, for progress) from the checkpoint, streams its bytes to sink
// (nil: none) in a second goroutine and returns the CRC-32C of the run
// with the patches applied (which it returns for the caller to write).
func (p *packer) gatherRun(ctx context.Context, r *Run, src []*safetensors.Tensor, logical int64, sink func(b []byte, off int64) error, onChunk func(int64)) (uint32, []patch, error) {
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
						onChunk(c.prog)
					}
				}
			}
			free <- c.buf[:cap(c.buf)]
		}
	}()
	patches, ferr := p.fill(ctx, r, src, logical, free, full, &failed)
	close(full)
	<-wdone
	if werr != nil {
		return 0, nil, werr
	}
	if ferr != nil {
		return 0, nil, ferr
	}
	for _, pt := range patches {
		crc = patchCRC(crc, pt, r.Length)
	}
	return crc, patches, nil
}

// fill streams run r's bytes as chunks of bs bytes (the last one shorter,
// all multiples of 4096) into full, taking buffers from free. Tensors are
// placed as they are assembled (see assembler), so with compression r's
// tensor places and sizes, DataBytes and Length are set on the way.
func (p *packer) fill(ctx context.Context, r *Run, src []*safetensors.Tensor, logical int64, free chan []byte, full chan chunk, failed *atomic.Bool) ([]patch, error) {
	w := &runFiller{bs: int64(p.bs), free: free, full: full}
	for i := range r.Tensors {
		w.compressed = w.compressed || r.Tensors[i].Compressed()
	}
	asm := &assembler{r: r, cur: -1, emit: w.emit, inMemory: w.inMemory}
	rb := p.rbuf.Cap()[:p.bs]
	for k := 0; k < len(src); {
		// An extent: tensors adjacent in one shard.
		e := k + 1
		for e < len(src) && src[e].Path == src[k].Path && src[e].Offset == src[e-1].Offset+src[e-1].Size {
			e++
		}
		if ok, err := p.readExtent(ctx, src, k, e, rb, asm, w, failed); !ok || err != nil {
			return nil, err // !ok: the writer's error is reported
		}
		k = e
	}
	if err := asm.close(); err != nil {
		return nil, err
	}
	// Flush through the end of the run (zero padding included).
	w.fed = logical
	for w.win < r.Length {
		if w.cur == nil {
			w.acquire()
		}
		n := min(w.bs, r.Length-w.win)
		w.pad(w.win + n)
		w.send(n)
		w.win += n
		w.cur = nil
	}
	return asm.patches, nil
}

// readExtent reads the extent src[k:e] (tensors adjacent in one shard) a
// buffer rb at a time and feeds each tensor's part to asm; ok is false
// when the writer failed.
func (p *packer) readExtent(ctx context.Context, src []*safetensors.Tensor, k, e int, rb []byte, asm *assembler, w *runFiller, failed *atomic.Bool) (ok bool, err error) {
	bs := w.bs
	f, size, err := p.source(p.pl.fileIdx[src[k].Path])
	if err != nil {
		return false, err
	}
	start, end := src[k].Offset, src[e-1].Offset+src[e-1].Size
	t := k
	for pos := start; pos < end; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if failed.Load() {
			return false, nil
		}
		lo := direct.AlignDown(pos)
		hi := min(lo+bs, direct.AlignUp(end), size)
		if hi <= pos {
			return false, fmt.Errorf("%s: tensor data ends past the file's %d bytes", src[k].Path, size)
		}
		if err := p.readSource(f, rb[:hi-lo], lo); err != nil {
			return false, err
		}
		stop := min(hi, end)
		for t < e {
			ts := src[t]
			a, b := max(pos, ts.Offset), min(stop, ts.Offset+ts.Size)
			if a < b {
				asm.feed(t, rb[a-lo:b-lo])
				w.fed += b - a
			}
			if ts.Offset+ts.Size > stop {
				break
			}
			t++
		}
		pos = stop
	}
	return true, nil
}

// runFiller writes one run's bytes, in order, into the buffers it takes
// from free and hands each full one to the writer on full.
type runFiller struct {
	bs         int64
	free       chan []byte
	full       chan chunk
	cur        []byte
	win        int64 // run offset of cur[0]
	filled     int64 // run offset up to which cur has been written
	compressed bool  // progress: with compression, source bytes assembled and reported
	fed, told  int64
}

// send hands the first n bytes of cur to the writer.
func (w *runFiller) send(n int64) {
	prog := n
	if w.compressed {
		prog = w.fed - w.told
	}
	w.told += prog
	w.full <- chunk{w.cur[:n], w.win, prog}
}

func (w *runFiller) acquire() {
	w.cur = <-w.free
	w.filled = w.win
}

// pad zeroes cur from filled up to run offset to (only the gaps between
// tensors and the tail are zeroed: clearing whole buffers cost more CPU
// than the copies).
func (w *runFiller) pad(to int64) {
	clear(w.cur[w.filled-w.win : to-w.win])
	w.filled = to
}

// emit copies data to run offset pos (non-decreasing across calls).
func (w *runFiller) emit(pos int64, data []byte) {
	for len(data) > 0 {
		if w.cur == nil {
			w.acquire()
		}
		for pos >= w.win+w.bs {
			w.pad(w.win + w.bs)
			w.send(w.bs)
			w.win += w.bs
			w.acquire()
		}
		w.pad(pos)
		n := copy(w.cur[pos-w.win:], data)
		data = data[n:]
		pos += int64(n)
		w.filled = pos
	}
}

// inMemory rewrites data at run offset pos when those bytes are still in
// cur (already written, not yet sent).
func (w *runFiller) inMemory(pos int64, data []byte) bool {
	if w.cur == nil || pos < w.win || pos+int64(len(data)) > w.filled {
		return false
	}
	copy(w.cur[pos-w.win:], data)
	return true
}

// rowChunkBytes is how many bytes of rows the assembler gathers before
// compressing them (at least one row).
const rowChunkBytes = 4 << 20

// assembler places a run's tensors as their checkpoint bytes arrive, in
// tensor order: each at the next multiple of TensorAlign after the one
// before (the plan's places, for an uncompressed run), BF16C tensors
// compressed a chunk of rows at a time on the way. A compressed tensor's
// row offsets, which come first, are known once its last row is: they go
// into the chunk still in memory, else into a patch.
type assembler struct {
	r        *Run
	emit     func(pos int64, data []byte)
	inMemory func(pos int64, data []byte) bool // copies data to pos if that part of the run is still in memory
	cur      int                               // tensor in progress, -1 before the first
	end      int64                             // end of the tensors finished
	pos      int64                             // where the tensor in progress continues
	// the compressed tensor in progress
	rows, cols, row int
	rowBuf          []uint16 // whole rows to compress (have bytes of it filled)
	have            int
	offs            []uint64
	z               [][]byte // per part of a row chunk, see compressRows
	patches         []patch
	err             error
}

// feed appends the next bytes of tensor t (t >= the tensor in progress).
func (a *assembler) feed(t int, data []byte) {
	for a.cur < t {
		a.next()
	}
	if !a.r.Tensors[t].Compressed() {
		a.emit(a.pos, data)
		a.pos += int64(len(data))
		return
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&a.rowBuf[0])), 2*len(a.rowBuf))
	for len(data) > 0 {
		n := copy(buf[a.have:], data)
		a.have += n
		data = data[n:]
		if a.have == len(buf) {
			a.compressRows()
		}
	}
}

// next finishes the tensor in progress and starts the next one.
func (a *assembler) next() {
	if a.cur >= 0 {
		a.finish()
	}
	a.cur++
	if a.cur >= len(a.r.Tensors) {
		return
	}
	t := &a.r.Tensors[a.cur]
	t.Offset = alignUp(a.end, TensorAlign)
	a.pos = t.Offset
	if t.Compressed() {
		a.rows, a.cols, a.row, a.have = int(t.Shape[0]), int(t.Shape[1]), 0, 0
		if n := min(max(1, rowChunkBytes/(2*a.cols)), a.rows) * a.cols; cap(a.rowBuf) < n {
			a.rowBuf = make([]uint16, n)
		} else {
			a.rowBuf = a.rowBuf[:n]
		}
		a.offs = make([]uint64, a.rows+1)
		a.pos += int64(8 * (a.rows + 1))
	}
}

// compressRows compresses the whole rows gathered and emits them. The
// rows are cut into one contiguous part per processor (the row encoder
// runs at a fraction of a disk's speed on one core), each part compressed
// into its own buffer, and the parts emitted in order: the same bytes as
// compressing them one after another.
func (a *assembler) compressRows() {
	n := a.have / (2 * a.cols)
	if a.row+n > a.rows {
		a.err = fmt.Errorf("internal error: tensor %s has more than its %d rows", a.r.Tensors[a.cur].Name, a.rows)
		return
	}
	parts := max(1, min(runtime.GOMAXPROCS(0), n*a.cols/minPartWeights))
	if len(a.z) < parts {
		a.z = append(a.z, make([][]byte, parts-len(a.z))...)
	}
	lens := make([]int, n)
	part := func(p int) {
		lo, hi := p*n/parts, (p+1)*n/parts
		z := a.z[p][:0]
		for i := lo; i < hi; i++ {
			before := len(z)
			z = kernels.AppendBF16CRow(z, a.rowBuf[i*a.cols:(i+1)*a.cols])
			lens[i] = len(z) - before
		}
		a.z[p] = z
	}
	if parts == 1 {
		part(0)
	} else {
		var wg sync.WaitGroup
		for p := range parts {
			wg.Go(func() { part(p) })
		}
		wg.Wait()
	}
	for i := range n {
		a.offs[a.row+1] = a.offs[a.row] + uint64(lens[i])
		a.row++
	}
	for _, z := range a.z[:parts] {
		a.emit(a.pos, z)
		a.pos += int64(len(z))
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&a.rowBuf[0])), 2*len(a.rowBuf))
	a.have = copy(buf, buf[n*2*a.cols:a.have])
}

// minPartWeights is the fewest weights worth a goroutine of their own.
const minPartWeights = 1 << 16

func (a *assembler) finish() {
	t := &a.r.Tensors[a.cur]
	if t.Compressed() {
		a.compressRows()
		if a.err == nil && (a.have != 0 || a.row != a.rows) {
			a.err = fmt.Errorf("internal error: tensor %s ended after %d of its %d rows", t.Name, a.row, a.rows)
		}
		table := make([]byte, 8*len(a.offs))
		for i, o := range a.offs {
			binary.LittleEndian.PutUint64(table[8*i:], o)
		}
		if !a.inMemory(t.Offset, table) {
			a.patches = append(a.patches, patch{t.Offset, table})
		}
		t.Size = a.pos - t.Offset
	} else if a.pos-t.Offset != t.Size && a.err == nil {
		a.err = fmt.Errorf("internal error: tensor %s got %d of its %d bytes", t.Name, a.pos-t.Offset, t.Size)
	}
	a.end = a.pos
}

// close finishes the run: every tensor placed, DataBytes and Length set.
func (a *assembler) close() error {
	for a.cur < len(a.r.Tensors) {
		a.next()
	}
	a.r.DataBytes, a.r.Length = a.end, alignUp(a.end, RunAlign)
	return a.err
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
// are gathered again (compressed again, for a compressed trunk) and their
// CRC-32C compared with m's. All equal: m is kept, trunk.json rewritten
// with the checkpoint's current identity, and "" returned. Otherwise the
// answer names the changed file and run.
func keepIfSame(ctx context.Context, pl *plan, m *Manifest, bs int, res *Result, finalPath string, onProgress func(Progress)) (string, error) {
	changed := changedFiles(&m.Source, &pl.m.Source)
	res.Manifest = m
	if len(changed) == 0 && m.Version != legacyVersion {
		return "", nil
	}
	which := pl.runsFrom(changed)
	pk := &packer{pl: pl, m: m, bs: bs, res: res}
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
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("pack interrupted: %w", err)
		}
		r := cloneRun(&m.Runs[i])
		got, _, err := pk.gatherRun(ctx, &r, pl.src[i], pl.m.Runs[i].Length, nil, func(n int64) { prog.add(r.Name, n) })
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("pack interrupted: %w", ctx.Err())
			}
			return "", err
		}
		r.CRC32C = got
		if want := &m.Runs[i]; got != want.CRC32C || r.Length != want.Length || !sameTensors(r.Tensors, want.Tensors) {
			var names []string
			for _, fi := range pl.filesOf(i) {
				if slices.Contains(changed, fi) {
					names = append(names, pl.m.Source.Files[fi].Name)
				}
			}
			return fmt.Sprintf("%s changed after the trunk in %s was packed: run %s gathered from it now has CRC-32C %08x, the packed one %08x (another version of the weights)",
				strings.Join(names, ", "), filepath.Dir(finalPath), r.Name, got, want.CRC32C), nil
		}
		prog.runsDone++
		prog.emit(r.Name)
	}
	res.CheckTime = time.Since(t0)
	kept := *m
	kept.Version, kept.Source = Version, pl.m.Source
	data, err := kept.Marshal()
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteDurable(finalPath, data); err != nil {
		return "", err
	}
	res.Manifest = &kept
	why := "the checkpoint's files were modified since the pack"
	switch {
	case m.Version < Version:
		why = "trunk.json was written by an older k3"
	case m.Source.WeightsSHA256 != pl.m.Source.WeightsSHA256:
		why = "the checkpoint's weights differ from the ones sampled when the trunk was packed"
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%s: %d run(s) gathered again from the checkpoint match the packed ones; trunk.json now records the checkpoint's identity (trunk.bin unchanged)", why, n))
	return "", nil
}
