// Package verify knows the released Kimi K3 file set and checks a model
// directory against it: present, missing, wrong size, extra, and (with the
// manifest `k3 download` writes) SHA-256. It also parses the safetensors
// index to say which shards the first N layers need, for partial sets.
package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"k3/storage/safetensors"
)

// FileSpec is a released file and its exact size (-1: size not published).
type FileSpec struct {
	Name string
	Size int64
}

// TokenizerFiles are the non-shard files the engine needs besides the
// shards (the C engine's spec, section 1.1; not in this repository). Their sizes are not published; when the
// manifest records them, that size is checked.
var TokenizerFiles = []string{"config.json", "tiktoken.model", "tokenizer_config.json"}

// PartSuffix marks an unfinished download.
const PartSuffix = ".part"

// ReleasedSize returns the published size of a shard (ok=false for other
// names).
func ReleasedSize(name string) (int64, bool) {
	i := sort.Search(len(ReleasedShards), func(i int) bool { return ReleasedShards[i].Name >= name })
	if i < len(ReleasedShards) && ReleasedShards[i].Name == name {
		return ReleasedShards[i].Size, true
	}
	return 0, false
}

// Status of one file.
type Status string

const (
	StatusOK           Status = "ok"            // present, right size (and hash, when checked)
	StatusMissing      Status = "missing"       // required, not there
	StatusWrongSize    Status = "wrong-size"    // there, size differs
	StatusHashMismatch Status = "hash-mismatch" // there, right size, SHA-256 differs from the manifest
	StatusNoHash       Status = "no-hash"       // --sha256 asked, manifest has no verified hash for it
	StatusPartial      Status = "partial"       // an unfinished NAME.part
	StatusExtra        Status = "extra"         // not part of the release (harmless)
	StatusNotNeeded    Status = "not-needed"    // released shard the --layers prefix does not need, absent
	StatusUnreadable   Status = "unreadable"    // stat or read failed
	StatusKnown        Status = "repo-file"     // not required, but recorded by the downloader (README, …)
)

// FileResult is the verdict for one file.
type FileResult struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Size   int64  `json:"size"` // bytes on disk (-1 if absent)
	Want   int64  `json:"want"` // expected bytes (-1 if unknown)
	SHA256 string `json:"sha256,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Report is the result of Check.
type Report struct {
	Dir        string       `json:"dir"`
	Layers     int          `json:"layers"` // 0: the whole model
	Files      []FileResult `json:"files"`
	Required   int          `json:"required"`
	OK         int          `json:"ok"`
	Missing    int          `json:"missing"`
	WrongSize  int          `json:"wrong_size"`
	HashBad    int          `json:"hash_mismatch"`
	NoHash     int          `json:"no_hash"`
	Extra      int          `json:"extra"`
	Partial    int          `json:"partial"`
	Bytes      int64        `json:"bytes"`      // bytes of required files present with the right size
	WantBytes  int64        `json:"want_bytes"` // bytes of all required files (known sizes)
	Hashed     bool         `json:"hashed"`
	Commit     string       `json:"commit,omitempty"` // from the manifest
	Complete   bool         `json:"complete"`
	Unreadable int          `json:"unreadable"`
	Draft      bool         `json:"draft,omitempty"` // the folder holds a DSpark drafter
}

// Options for Check.
type Options struct {
	SHA256 bool // hash every required file and compare with the manifest
	Layers int  // > 0: only the shards the first Layers layers need (needs the index)
	Jobs   int  // files hashed in parallel (default min(4, GOMAXPROCS))
	// Shards replaces the released shard table (nil: ReleasedShards). For
	// other checkpoints and for tests.
	Shards []FileSpec
	// Draft: dir is a DSpark drafter's folder, which needs config.json but
	// no tokenizer files (CheckFolder sets it from the folder's config).
	Draft bool
	// Progress, if set, is called from hashing goroutines with the bytes
	// hashed so far and the total to hash.
	Progress func(done, total int64)
}

// Check inspects dir. It returns an error only when the check itself cannot
// run (directory unreadable, --layers without an index, --sha256 without a
// manifest); problems with files are in the Report. It runs in phases, as
// trunk.Pack does: read the folder and its manifest, work out the
// required set, check each required file, then the rest of the folder,
// hash, and count.
func Check(ctx context.Context, dir string, opt Options) (*Report, error) {
	c := &checker{dir: dir, opt: opt, rep: &Report{Dir: dir, Layers: opt.Layers, Hashed: opt.SHA256, Draft: opt.Draft}}
	for _, phase := range []func(context.Context) error{c.read, c.requiredSet, c.checkRequired, c.checkOthers, c.hash, c.count} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	return c.rep, nil
}

// checker is one Check of a folder.
type checker struct {
	dir       string
	opt       Options
	rep       *Report
	onDisk    map[string]fs.DirEntry // the folder's entries by name
	man       *Manifest              // nil: no manifest
	shards    []FileSpec             // the release's shard table
	required  map[string]int64       // name -> size (-1 unknown)
	notNeeded map[string]bool        // released shards --layers does not need
	toHash    []int                  // indexes into rep.Files
}

// read lists the folder and reads its manifest, if any.
func (c *checker) read(context.Context) error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.dir, err)
	}
	c.onDisk = map[string]fs.DirEntry{}
	for _, e := range entries {
		c.onDisk[e.Name()] = e
	}
	if m, err := ReadManifest(c.dir); err == nil {
		c.man = m
		c.rep.Commit = m.Commit
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if c.opt.SHA256 && c.man == nil {
		return fmt.Errorf("--sha256 needs %s in %s, which 'k3 download' writes; files fetched another way can be checked with 'hf cache verify'", ManifestFile, c.dir)
	}
	return nil
}

// sizeOf is a shard's size in the release's table.
func (c *checker) sizeOf(name string) (int64, bool) {
	for _, s := range c.shards {
		if s.Name == name {
			return s.Size, true
		}
	}
	return 0, false
}

// requiredSet works out the files the folder must hold and their sizes:
// every shard (or those the first --layers layers need, and the index),
// the tokenizer files (a drafter: its config), with the manifest's sizes
// where the release publishes none.
func (c *checker) requiredSet(context.Context) error {
	c.shards = c.opt.Shards
	if c.shards == nil {
		c.shards = ReleasedShards[:]
	}
	c.required = map[string]int64{}
	for _, s := range c.shards {
		c.required[s.Name] = s.Size
	}
	if c.opt.Layers > 0 {
		if err := c.layersOnly(); err != nil {
			return err
		}
	}
	nonShard := TokenizerFiles
	if c.opt.Draft {
		nonShard = []string{"config.json"}
	}
	for _, n := range nonShard {
		c.required[n] = -1
	}
	if c.man != nil {
		for n, sz := range c.required {
			if e, ok := c.man.Lookup(n); ok && sz < 0 {
				c.required[n] = e.Size
			}
		}
	}
	return nil
}

// layersOnly narrows the required shards to those the first --layers
// layers need (from the index), and the index itself.
func (c *checker) layersOnly() error {
	ix, err := safetensors.ReadIndex(c.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--layers needs %s in %s to know which shards hold which layers ('k3 download --layers N' fetches it)", safetensors.IndexFile, c.dir)
		}
		return err
	}
	need, err := ShardsForLayers(ix, c.opt.Layers)
	if err != nil {
		return err
	}
	c.required = map[string]int64{safetensors.IndexFile: -1}
	for _, s := range need {
		sz, ok := c.sizeOf(s)
		if !ok {
			sz = -1
		}
		c.required[s] = sz
	}
	c.notNeeded = map[string]bool{}
	for _, s := range c.shards {
		if _, ok := c.required[s.Name]; !ok {
			c.notNeeded[s.Name] = true
		}
	}
	return nil
}

// checkRequired checks each required file by name: there, a regular
// file, the right size (and queued for hashing with --sha256).
func (c *checker) checkRequired(context.Context) error {
	names := make([]string, 0, len(c.required))
	for n := range c.required {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		want := c.required[n]
		c.rep.Required++
		if want > 0 {
			c.rep.WantBytes += want
		}
		r := c.requiredFile(n, want)
		if r.Status == StatusOK {
			c.rep.Bytes += r.Size
			if c.opt.SHA256 {
				c.toHash = append(c.toHash, len(c.rep.Files))
			}
		}
		c.rep.Files = append(c.rep.Files, r)
	}
	return nil
}

// requiredFile is the verdict on required file n of size want (-1 unknown).
func (c *checker) requiredFile(n string, want int64) FileResult {
	r := FileResult{Name: n, Want: want, Size: -1}
	e, ok := c.onDisk[n]
	if !ok {
		r.Status = StatusMissing
		if _, part := c.onDisk[n+PartSuffix]; part {
			r.Detail = "download in progress (" + n + PartSuffix + ")"
		}
		return r
	}
	info, err := e.Info()
	if err != nil || !info.Mode().IsRegular() {
		r.Status = StatusUnreadable
		if err != nil {
			r.Detail = err.Error()
		} else {
			r.Detail = "not a regular file"
		}
		return r
	}
	r.Size = info.Size()
	if want >= 0 && r.Size != want {
		r.Status = StatusWrongSize
		r.Detail = fmt.Sprintf("%d bytes, want %d (%+d): delete it and re-run 'k3 download'", r.Size, want, r.Size-want)
		return r
	}
	r.Status = StatusOK
	return r
}

// checkOthers says what everything else in the folder is: an unfinished
// download, a shard --layers does not need, a file the downloader
// recorded, or an extra.
func (c *checker) checkOthers(context.Context) error {
	var others []string
	for n := range c.onDisk {
		if _, ok := c.required[n]; !ok {
			others = append(others, n)
		}
	}
	sort.Strings(others)
	for _, n := range others {
		e := c.onDisk[n]
		if e.IsDir() || n == ManifestFile || strings.HasPrefix(n, "."+ManifestFile) {
			continue
		}
		c.rep.Files = append(c.rep.Files, c.otherFile(n, e))
	}
	return nil
}

// otherFile is the verdict on a file the folder need not hold.
func (c *checker) otherFile(n string, e fs.DirEntry) FileResult {
	info, _ := e.Info()
	size := int64(-1)
	if info != nil {
		size = info.Size()
	}
	r := FileResult{Name: n, Size: size, Want: -1}
	switch {
	case strings.HasSuffix(n, PartSuffix):
		r.Status = StatusPartial
		r.Detail = "unfinished download; re-run 'k3 download' to resume it"
	case c.notNeeded[n]:
		r.Status = StatusOK
		r.Detail = "not needed for --layers, present"
		if sz, _ := c.sizeOf(n); sz != size {
			r.Status = StatusWrongSize
			r.Want = sz
			r.Detail = fmt.Sprintf("%d bytes, want %d (not needed for --layers)", size, sz)
		}
	case n == safetensors.IndexFile:
		r.Status = StatusKnown
	default:
		r.Status = StatusExtra
		if c.man != nil {
			if _, ok := c.man.Lookup(n); ok {
				r.Status = StatusKnown
			}
		}
	}
	return r
}

// hash hashes the files queued (--sha256) and compares with the manifest.
func (c *checker) hash(ctx context.Context) error {
	if len(c.toHash) == 0 {
		return nil
	}
	return hashAll(ctx, c.dir, c.rep, c.toHash, c.man, c.opt)
}

// count adds up the verdicts; the folder is complete when every required
// file is ok.
func (c *checker) count(context.Context) error {
	rep := c.rep
	for i := range rep.Files {
		_, req := c.required[rep.Files[i].Name]
		switch rep.Files[i].Status {
		case StatusOK:
			if req {
				rep.OK++
			}
		case StatusMissing:
			rep.Missing++
		case StatusWrongSize:
			if req {
				rep.WrongSize++
			}
		case StatusHashMismatch:
			rep.HashBad++
		case StatusNoHash:
			rep.NoHash++
		case StatusExtra:
			rep.Extra++
		case StatusPartial:
			rep.Partial++
		case StatusUnreadable:
			rep.Unreadable++
		}
	}
	rep.Complete = rep.OK == rep.Required
	return nil
}

func hashAll(ctx context.Context, dir string, rep *Report, idx []int, man *Manifest, opt Options) error {
	var total, done atomic.Int64
	for _, i := range idx {
		total.Add(rep.Files[i].Size)
	}
	jobs := opt.Jobs
	if jobs <= 0 {
		jobs = min(4, runtime.GOMAXPROCS(0))
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := &rep.Files[i]
				e, ok := man.Lookup(r.Name)
				if !ok {
					r.Status = StatusNoHash
					r.Detail = "no recorded SHA-256 in " + ManifestFile + "; re-run 'k3 download' to hash and record it"
					continue
				}
				if e.Checked == CheckedSize {
					// its recorded hash is its own: a match would prove nothing
					r.Status = StatusNoHash
					r.Detail = "size checked, no published hash: the hub listed no SHA-256 or git blob id for it, so its content was never compared with the source"
					continue
				}
				sum, _, err := HashFile(ctx, filepath.Join(dir, r.Name), func(n int64) {
					d := done.Add(n)
					if opt.Progress != nil {
						opt.Progress(d, total.Load())
					}
				})
				if err != nil {
					if ctx.Err() != nil {
						errMu.Lock()
						if firstErr == nil {
							firstErr = ctx.Err()
						}
						errMu.Unlock()
						continue
					}
					r.Status = StatusUnreadable
					r.Detail = err.Error()
					continue
				}
				r.SHA256 = sum
				if sum != e.SHA256 {
					r.Status = StatusHashMismatch
					r.Detail = fmt.Sprintf("sha256 %s, manifest says %s: delete it and re-run 'k3 download'", sum, e.SHA256)
				}
			}
		}()
	}
	for _, i := range idx {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}
