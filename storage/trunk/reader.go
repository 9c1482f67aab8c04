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
	if _, err := t.f.ReadAt(dst[:r.Length], r.Offset); err != nil {
		return fmt.Errorf("trunk: run %s: %w", r.Name, err)
	}
	return nil
}

// VerifyRun reads run r into buf (len(buf) >= r.Length, as for ReadRun)
// and checks its CRC-32C against the manifest. On success buf holds the
// run.
func (t *Trunk) VerifyRun(r *Run, buf []byte) error {
	if err := t.ReadRun(r, buf); err != nil {
		return err
	}
	if got := crc32.Checksum(buf[:r.Length], castagnoli); got != r.CRC32C {
		return fmt.Errorf("trunk: run %s (%d bytes at offset %d of %s): CRC-32C %08x, the manifest says %08x: the file is corrupt, repack (k3 pack --force)",
			r.Name, r.Length, r.Offset, filepath.Join(t.dir, BinFile), got, r.CRC32C)
	}
	return nil
}

func (t *Trunk) check(r *Run, dst []byte) error {
	if r == nil {
		return errors.New("trunk: nil run")
	}
	if own, ok := t.byName[r.Name]; !ok || own.Offset != r.Offset || own.Length != r.Length {
		return fmt.Errorf("trunk: run %q is not a run of this trunk", r.Name)
	}
	if int64(len(dst)) < r.Length {
		return fmt.Errorf("trunk: run %s needs a %d-byte buffer, got %d", r.Name, r.Length, len(dst))
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
// the same order with the same modification times, the same tensor prefix,
// and every tensor of trunk.json with the dtype, shape and place the
// checkpoint gives it. The error wraps ErrSourceMismatch, names the file
// or tensor and says how to repack.
func (t *Trunk) CheckSet(set *safetensors.Set) error {
	pl, err := makePlan(set)
	if err != nil {
		return err
	}
	want := &pl.m.Source
	if ok, why := sameSource(&t.m.Source, want); !ok {
		return fmt.Errorf("%w: %s: %s; repack it: k3 pack MODEL_DIR %s --force", ErrSourceMismatch, t.dir, why, t.dir)
	}
	if ch := changedFiles(&t.m.Source, want); len(ch) > 0 {
		f := t.m.Source.Files[ch[0]]
		return fmt.Errorf("%w: %s was modified after the trunk in %s was packed from it (%s then, %s now), so its weights may differ: run k3 pack MODEL_DIR %s to compare them (the trunk is kept if they are the same; --force repacks)",
			ErrSourceMismatch, f.Name, t.dir, stamp(f.ModTime), stamp(want.Files[ch[0]].ModTime), t.dir)
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
