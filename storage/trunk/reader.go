package trunk

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"

	"k3/storage/direct"
	"k3/storage/safetensors"

	"k3/storage/regfile"
)

// Trunk is an opened, complete trunk directory. Its methods are safe for
// concurrent use (ReadRun from several goroutines); Close must not race
// with them.
type Trunk struct {
	dir    string
	m      *Manifest
	f      *direct.File
	byName map[string]*Run
	layers []*Run
	tensor map[string]tensorRef
}

type tensorRef struct {
	run *Run
	t   *Tensor
}

// Open opens the trunk in dir: it parses trunk.json strictly (see
// ParseManifest) and checks that trunk.bin is exactly total_bytes long.
// trunk.bin is opened with O_DIRECT where the filesystem allows it.
// Run contents are not read; VerifyRun checks a run's CRC.
func Open(dir string) (*Trunk, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	mpath := filepath.Join(dir, ManifestFile)
	if m.Version == legacyVersion {
		return nil, fmt.Errorf("trunk: %s was written by an older k3 and does not record what identifies the checkpoint's content: run k3 pack MODEL_DIR %s once (it checks the trunk against the checkpoint and records it, without rewriting %s): %w", mpath, dir, BinFile, ErrSourceMismatch)
	}
	bpath := filepath.Join(dir, BinFile)
	f, err := direct.Open(bpath)
	if err != nil {
		return nil, fmt.Errorf("trunk: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trunk: %w", err)
	}
	if size != m.TotalBytes {
		f.Close()
		return nil, fmt.Errorf("trunk: %s is %d bytes but %s says total_bytes %d (truncated or from another pack; repack)", bpath, size, mpath, m.TotalBytes)
	}
	t := &Trunk{dir: dir, m: m, f: f, byName: map[string]*Run{}, tensor: map[string]tensorRef{}}
	t.layers = make([]*Run, m.Layers())
	for i := range m.Runs {
		r := &m.Runs[i]
		t.byName[r.Name] = r
		if r.Layer >= 0 {
			t.layers[r.Layer] = r
		}
		for j := range r.Tensors {
			t.tensor[r.Tensors[j].Name] = tensorRef{r, &r.Tensors[j]}
		}
	}
	return t, nil
}

// ReadManifest reads and checks dir's trunk.json (see ParseManifest)
// without opening trunk.bin. The error says when dir holds an interrupted
// pack or no trunk at all.
func ReadManifest(dir string) (*Manifest, error) {
	mpath := filepath.Join(dir, ManifestFile)
	data, err := regfile.ReadFile(mpath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, perr := os.Stat(filepath.Join(dir, PartialFile)); perr == nil {
				return nil, fmt.Errorf("trunk: %s: the pack was interrupted (only %s exists); run k3 pack again to finish it", dir, PartialFile)
			}
			return nil, fmt.Errorf("trunk: %s has no %s (not a packed trunk; run k3 pack MODEL_DIR %s)", dir, ManifestFile, dir)
		}
		return nil, fmt.Errorf("trunk: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			me.Path = mpath
		}
		return nil, err
	}
	return m, nil
}

// Dir returns the trunk directory.
func (t *Trunk) Dir() string { return t.dir }

// Manifest returns the parsed trunk.json. It must not be modified.
func (t *Trunk) Manifest() *Manifest { return t.m }

// Layers returns the number of layer runs.
func (t *Trunk) Layers() int { return len(t.layers) }

// Direct reports whether runs are read with O_DIRECT.
func (t *Trunk) Direct() bool { return t.f.Direct() }

// Run returns the run called name ("embed", "head", "final", "layer.<i>").
func (t *Trunk) Run(name string) (*Run, bool) {
	r, ok := t.byName[name]
	return r, ok
}

// LayerRun returns layer i's run.
func (t *Trunk) LayerRun(i int) (*Run, bool) {
	if i < 0 || i >= len(t.layers) {
		return nil, false
	}
	return t.layers[i], true
}

// Tensor returns the run holding the tensor with this full checkpoint
// name, and the tensor.
func (t *Trunk) Tensor(name string) (*Run, *Tensor, bool) {
	ref, ok := t.tensor[name]
	return ref.run, ref.t, ok
}

// ReadRun reads the whole run (Length bytes, padding included) into
// dst[:r.Length]. With dst 4096-aligned (a direct.AllocHuge buffer) the
// read goes straight from the device into dst in one request per GiB;
// any other slice works too, through a bounce buffer.
func (t *Trunk) ReadRun(r *Run, dst []byte) error {
	if err := t.check(r, dst); err != nil {
		return err
	}
	return t.ReadRunParts(r, []RunPart{{From: 0, Dst: dst[:r.Length]}}, false, 0, nil)
}

// VerifyRun reads run r into buf (len(buf) >= r.Length, as for ReadRun)
// and checks its CRC-32C against the manifest. On success buf holds the
// run.
func (t *Trunk) VerifyRun(r *Run, buf []byte) error {
	if err := t.check(r, buf); err != nil {
		return err
	}
	return t.ReadRunParts(r, []RunPart{{From: 0, Dst: buf[:r.Length]}}, true, 0, nil)
}

// RunPart is a stretch of a run: its bytes [From, From+len(Dst)), read
// into Dst.
type RunPart struct {
	From int64
	Dst  []byte
}

// ReadRunParts reads run r into parts: in order, whole pages each, the
// first from the start of the run, each starting at or before the end of
// the one before (they may overlap) and the last ending at the run's end.
// A run read in parts can live in separate places in memory. verify checks
// the run's CRC-32C over the bytes read. Each part is read in reads of
// piece bytes (a multiple of 4096; 0: whole parts), calling before, when
// not nil, ahead of each: a reader that must let more urgent reads go
// first waits there, between pieces, instead of queueing behind a run.
func (t *Trunk) ReadRunParts(r *Run, parts []RunPart, verify bool, piece int64, before func()) error {
	if err := t.own(r); err != nil {
		return err
	}
	if piece < 0 || piece%4096 != 0 {
		return fmt.Errorf("trunk: read pieces of %d bytes are not whole pages", piece)
	}
	end := int64(0)
	for i, p := range parts {
		n := int64(len(p.Dst))
		if p.From < 0 || p.From > end || p.From%4096 != 0 || n%4096 != 0 || n == 0 || (i > 0 && p.From <= parts[i-1].From) {
			return fmt.Errorf("trunk: run %s: part %d (bytes %d..%d) does not follow on whole pages", r.Name, i, p.From, p.From+n)
		}
		end = max(end, p.From+n)
	}
	if end != r.Length {
		return fmt.Errorf("trunk: run %s: the parts cover %d of its %d bytes", r.Name, end, r.Length)
	}
	crc, covered := uint32(0), int64(0)
	for _, p := range parts {
		n := int64(len(p.Dst))
		step := piece
		if step == 0 || step > n {
			step = n
		}
		for from := int64(0); from < n; from += step {
			to := min(from+step, n)
			if before != nil {
				before()
			}
			if _, err := t.f.ReadAt(p.Dst[from:to], r.Offset+p.From+from); err != nil {
				return fmt.Errorf("trunk: run %s: %w", r.Name, err)
			}
		}
		if verify && p.From+n > covered {
			crc = crc32.Update(crc, castagnoli, p.Dst[covered-p.From:])
			covered = p.From + n
		}
	}
	if verify && crc != r.CRC32C {
		return fmt.Errorf("trunk: run %s (%d bytes at offset %d of %s): CRC-32C %08x, the manifest says %08x: the file is corrupt, repack (k3 pack --force)",
			r.Name, r.Length, r.Offset, filepath.Join(t.dir, BinFile), crc, r.CRC32C)
	}
	return nil
}

func (t *Trunk) check(r *Run, dst []byte) error {
	if err := t.own(r); err != nil {
		return err
	}
	if int64(len(dst)) < r.Length {
		return fmt.Errorf("trunk: run %s needs a %d-byte buffer, got %d", r.Name, r.Length, len(dst))
	}
	return nil
}

// own refuses a run that is not one of this trunk's.
func (t *Trunk) own(r *Run) error {
	if r == nil {
		return errors.New("trunk: nil run")
	}
	if own, ok := t.byName[r.Name]; !ok || own.Offset != r.Offset || own.Length != r.Length {
		return fmt.Errorf("trunk: run %q is not a run of this trunk", r.Name)
	}
	return nil
}

// CheckSource is CheckSet for the checkpoint in modelDir.
func (t *Trunk) CheckSource(modelDir string) error {
	set, err := safetensors.Open(modelDir)
	if err != nil {
		return err
	}
	defer set.Close()
	return t.CheckSet(set)
}

// CheckSet checks that set is the checkpoint the trunk was packed from,
// unchanged: the same safetensors files (names, sizes, header hashes) in
// the same order with the same modification times, the same weights
// fingerprint (Source.WeightsSHA256: a trunk.json without one, from an
// older k3, is refused until k3 pack has checked it), the same tensor prefix,
// and every tensor of trunk.json with the dtype, shape and place the
// checkpoint gives it. The error wraps ErrSourceMismatch, names the file
// or tensor and says how to repack.
func (t *Trunk) CheckSet(set *safetensors.Set) error {
	pl, err := makePlan(set, t.Layers())
	if err != nil {
		return err
	}
	want := &pl.m.Source
	if ok, why := sameSource(&t.m.Source, want); !ok {
		return fmt.Errorf("%w: %s: %s; repack it: k3 pack MODEL_DIR %s --force", ErrSourceMismatch, t.dir, why, t.dir)
	}
	if t.m.Source.WeightsSHA256 == "" {
		return fmt.Errorf("%w: trunk.json in %s was written by an older k3 (version %d) that did not fingerprint the weights: run k3 pack MODEL_DIR %s to check them against the checkpoint (the trunk is kept if they are the same)",
			ErrSourceMismatch, t.dir, t.m.Version, t.dir)
	}
	if ch := modifiedFiles(&t.m.Source, want); len(ch) > 0 {
		f := t.m.Source.Files[ch[0]]
		return fmt.Errorf("%w: %s was modified after the trunk in %s was packed from it (%s then, %s now), so its weights may differ: run k3 pack MODEL_DIR %s to compare them (the trunk is kept if they are the same; --force repacks)",
			ErrSourceMismatch, f.Name, t.dir, stamp(f.ModTime), stamp(want.Files[ch[0]].ModTime), t.dir)
	}
	if t.m.Source.WeightsSHA256 != want.WeightsSHA256 {
		return fmt.Errorf("%w: the trunk in %s was packed from different weights than this checkpoint's (same files, layout and times; another version of the weights, e.g. a fine-tune): pack again: k3 pack MODEL_DIR %s --force",
			ErrSourceMismatch, t.dir, t.dir)
	}
	if why := planDiff(t.m, pl.m); why != "" {
		return fmt.Errorf("%w: %s does not match the checkpoint: %s; repack it: k3 pack MODEL_DIR %s --force", ErrSourceMismatch, filepath.Join(t.dir, ManifestFile), why, t.dir)
	}
	return nil
}

func stamp(ns int64) string {
	if ns == 0 {
		return "unknown"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000000000 UTC")
}

// Close closes trunk.bin.
func (t *Trunk) Close() error { return t.f.Close() }
