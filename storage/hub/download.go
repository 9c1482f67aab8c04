package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k3/storage/direct"
	"k3/storage/safetensors"
	"k3/storage/units"
	"k3/storage/verify"
)

// Options for Download.
type Options struct {
	Dest     string // model directory (created if missing)
	Revision string // branch, tag or commit; "" = main
	Layers   int    // > 0: only the shards the first Layers layers need, plus all non-shard files
	Jobs     int    // files in parallel (default 4)
	// Files, if set, restricts the download to these repository paths
	// (applied after Layers).
	Files []string
	// Pinned, if set, is the exact file set expected (name, size, sha256):
	// only these files are fetched, the hub's listing must agree with every
	// size and published sha256, and each file's content is checked against
	// the pinned sha256 (small files too, not only their git blob id).
	Pinned []RemoteFile
	// Progress receives events; it is called from several goroutines, one
	// call at a time, and must not block for long.
	Progress func(Event)
	// Interval between EventProgress snapshots (default 500 ms).
	Interval time.Duration
}

// FileResult is the outcome for one file.
type FileResult struct {
	Name    string
	Size    int64
	SHA256  string
	Skipped bool // was already complete and verified
	// SizeOnly: the hub published no hash for the file (neither an LFS
	// sha256 nor a git blob id), so only its size was checked.
	SizeOnly bool
	Err      error
}

// Result of Download.
type Result struct {
	Repo     string
	Revision string
	Commit   string
	Files    []FileResult
	Fetched  int64 // bytes transferred in this run
	Total    int64 // bytes of all selected files
	Elapsed  time.Duration
}

// diskFree is direct.DiskFree, a variable so tests can simulate a full disk.
var diskFree = direct.DiskFree

// Download fetches the repository at one pinned commit into opt.Dest. It
// can be re-run at any time: finished files recorded in the manifest are
// skipped without re-hashing, other complete files are hashed and kept if
// right, .part files resume with Range requests, wrong files are fetched
// again alone. Every finished file is verified (size, and the LFS sha256 or
// git blob id) before an atomic rename gives it its final name, and is then
// recorded in k3-manifest.json.
func (c *Client) Download(ctx context.Context, opt Options) (*Result, error) {
	d := &downloader{c: c, opt: opt, tr: newTracker(nil)}
	res, err := d.run(ctx)
	d.emit(Event{Kind: EventDone, Err: err})
	return res, err
}

// downloader is one Download. Its run goes through named phases, as
// trunk.Pack does: prepare (the folder and its manifest), pin (the
// commit), plan (the files, the space they need), fetchAll, verdict.
type downloader struct {
	c      *Client
	opt    Options
	tr     *tracker
	man    *verify.Manifest
	manMu  sync.Mutex
	commit string
	emitMu sync.Mutex

	rev   string       // the revision asked for ("main" by default)
	info  *RepoInfo    // the listing at the pinned commit
	files []RemoteFile // the files selected
	res   *Result
}

func (d *downloader) emit(e Event) {
	if d.opt.Progress == nil {
		return
	}
	if e.Kind != EventProgress || e.Snap.Files == nil {
		e.Snap = d.tr.snapshot()
	}
	d.emitMu.Lock()
	defer d.emitMu.Unlock()
	d.opt.Progress(e)
}

func (d *downloader) note(format string, a ...any) {
	d.emit(Event{Kind: EventNote, Message: fmt.Sprintf(format, a...)})
}

func (d *downloader) run(ctx context.Context) (*Result, error) {
	for _, phase := range []func(context.Context) error{d.prepare, d.pin, d.plan} {
		if err := phase(ctx); err != nil {
			return nil, err
		}
	}
	out := d.fetchAll(ctx)
	return d.res, d.verdict(ctx, out)
}

// prepare creates the destination and reads its manifest (a new one when
// there is none); a manifest of another repository is refused.
func (d *downloader) prepare(context.Context) error {
	dest := d.opt.Dest
	if dest == "" {
		return errors.New("download: no destination directory given")
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dest, err)
	}
	d.rev = d.opt.Revision
	if d.rev == "" {
		d.rev = "main"
	}
	man, err := verify.ReadManifest(dest)
	switch {
	case err == nil:
		if man.Repo != "" && man.Repo != d.c.Repo {
			return fmt.Errorf("%s holds files of %s (see %s), not %s: use another directory", dest, man.Repo, verify.ManifestFile, d.c.Repo)
		}
	case errors.Is(err, fs.ErrNotExist):
		man = &verify.Manifest{Repo: d.c.Repo}
	default:
		return err
	}
	d.man = man
	return nil
}

// pin resolves the revision to one commit and records it: the recorded
// one for the same revision name, so a resumed download never mixes two
// commits.
func (d *downloader) pin(ctx context.Context) error {
	dest, rev, man := d.opt.Dest, d.rev, d.man
	switch {
	case verify.IsCommit(rev):
		d.commit = rev
	case man.Commit != "" && man.Revision == rev:
		d.commit = man.Commit
		d.note("continuing %s at commit %s, pinned by %s (pass --revision COMMIT to move)", rev, man.Commit, verify.ManifestFile)
	}
	if man.Commit != "" && d.commit != "" && d.commit != man.Commit && len(man.Files) > 0 {
		return fmt.Errorf("%s holds files of commit %s; --revision %s asks for %s: use another directory, or delete %s to start over", dest, man.Commit, rev, d.commit, verify.ManifestFile)
	}
	lookup := rev
	if d.commit != "" {
		lookup = d.commit
	}
	info, err := d.c.Info(ctx, lookup)
	if err != nil {
		return err
	}
	if d.commit != "" && info.Commit != d.commit {
		return fmt.Errorf("hub resolved commit %s to %s: refusing to mix commits in %s", d.commit, info.Commit, dest)
	}
	if man.Commit != "" && info.Commit != man.Commit && len(man.Files) > 0 {
		return fmt.Errorf("%s holds files of commit %s but %s is now %s: pass --revision %s to finish that download, or use another directory", dest, man.Commit, rev, info.Commit, man.Commit)
	}
	d.info, d.commit = info, info.Commit
	man.Repo, man.Revision, man.Commit = d.c.Repo, rev, d.commit
	return d.saveManifest()
}

// plan selects the files and checks that what is still to come fits on
// the disk.
func (d *downloader) plan(ctx context.Context) error {
	files, err := d.selectFiles(ctx, d.info)
	if err != nil {
		return err
	}
	d.files = files
	d.res = &Result{Repo: d.c.Repo, Revision: d.rev, Commit: d.commit}
	for _, f := range files {
		d.tr.add(f.Name, f.Size)
		d.res.Total += f.Size
	}
	var need int64
	for _, f := range files {
		need += f.Size - d.presentBytes(f)
	}
	if free, _, err := diskFree(d.opt.Dest); err == nil && need > free {
		return fmt.Errorf("not enough space in %s: %s still to download, %s free (short by %s); free space or choose another --dest (the checkpoint is %s)",
			d.opt.Dest, units.Bytes(need), units.Bytes(free), units.Bytes(need-free), units.Bytes(d.res.Total))
	}
	d.emit(Event{Kind: EventPlan, Message: fmt.Sprintf("%d files, %s at commit %s, %s to fetch", len(files), units.Bytes(d.res.Total), d.commit, units.Bytes(need))})
	return nil
}

// ticker emits a progress snapshot every interval until stop is closed;
// done is closed when it has stopped.
func (d *downloader) ticker(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	iv := d.opt.Interval
	if iv <= 0 {
		iv = 500 * time.Millisecond
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d.emit(Event{Kind: EventProgress, Snap: d.tr.snapshot()})
		}
	}
}

// fetchAll fetches the files on Jobs workers, with progress snapshots
// meanwhile. Access and disk errors stop every worker: other files would
// fail the same way.
func (d *downloader) fetchAll(ctx context.Context) []FileResult {
	stopTick, tickDone := make(chan struct{}), make(chan struct{})
	go d.ticker(stopTick, tickDone)
	jobs := d.opt.Jobs
	if jobs <= 0 {
		jobs = 4
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	out := make([]FileResult, len(d.files))
	var wg sync.WaitGroup
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = d.fetch(ctx, d.files[i])
				if stopsAll(out[i].Err) {
					cancel()
				}
			}
		}()
	}
feed:
	for i := range d.files {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(stopTick)
	<-tickDone
	return out
}

// stopsAll says whether a file's error stops the whole download: access
// refused, or the disk full.
func stopsAll(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var he *HTTPError
	var fe *fatalError
	return errors.As(err, &he) && (he.Status == 401 || he.Status == 403) || errors.As(err, &fe) && errors.Is(fe, syscall.ENOSPC)
}

// verdict puts the files' results in the result and gives the download's
// error: the first file's (a cancellation only when nothing else failed),
// with the count when several failed.
func (d *downloader) verdict(ctx context.Context, out []FileResult) error {
	res := d.res
	res.Files = out
	snap := d.tr.snapshot()
	res.Fetched, res.Elapsed = snap.Fetched, snap.Elapsed
	var errs []string
	var first error
	for i, r := range out {
		if r.Name == "" { // never started
			out[i] = FileResult{Name: d.files[i].Name, Err: context.Canceled}
			r = out[i]
		}
		if r.Err != nil {
			if first == nil || errors.Is(first, context.Canceled) {
				first = r.Err
			}
			if !errors.Is(r.Err, context.Canceled) {
				errs = append(errs, r.Err.Error())
			}
		}
	}
	if err := ctx.Err(); err != nil && len(errs) == 0 && first == nil {
		first = err
	}
	if first != nil && len(errs) > 1 {
		return fmt.Errorf("%d files failed; first: %w", len(errs), first)
	}
	return first
}

// selectFiles applies --layers and Files to the repository listing.
func (d *downloader) selectFiles(ctx context.Context, info *RepoInfo) ([]RemoteFile, error) {
	files := info.Files
	if d.opt.Layers > 0 {
		var idx *RemoteFile
		for i := range files {
			if files[i].Name == safetensors.IndexFile {
				idx = &files[i]
			}
		}
		if idx == nil {
			return nil, fmt.Errorf("--layers needs %s, which commit %s of %s does not have", safetensors.IndexFile, d.commit, d.c.Repo)
		}
		d.tr.add(idx.Name, idx.Size)
		if r := d.fetch(ctx, *idx); r.Err != nil {
			return nil, r.Err
		}
		ix, err := safetensors.ReadIndex(d.opt.Dest)
		if err != nil {
			return nil, err
		}
		need, err := verify.ShardsForLayers(ix, d.opt.Layers)
		if err != nil {
			return nil, err
		}
		want := map[string]bool{}
		for _, s := range need {
			want[s] = true
		}
		var sel []RemoteFile
		for _, f := range files {
			if !strings.HasSuffix(f.Name, ".safetensors") || want[f.Name] {
				sel = append(sel, f)
				delete(want, f.Name)
			}
		}
		if len(want) > 0 {
			var miss []string
			for s := range want {
				miss = append(miss, s)
			}
			sort.Strings(miss)
			return nil, fmt.Errorf("the index names shards the commit does not have: %s", strings.Join(miss, ", "))
		}
		files = sel
	}
	if len(d.opt.Files) > 0 {
		want := map[string]bool{}
		for _, f := range d.opt.Files {
			want[f] = true
		}
		var sel []RemoteFile
		for _, f := range files {
			if want[f.Name] {
				sel = append(sel, f)
				delete(want, f.Name)
			}
		}
		for f := range want {
			return nil, fmt.Errorf("file %s is not in %s at commit %s", f, d.c.Repo, d.commit)
		}
		files = sel
	}
	if len(d.opt.Pinned) > 0 {
		var err error
		if files, err = pinFiles(files, d.opt.Pinned, d.c.Repo, d.commit); err != nil {
			return nil, err
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("nothing to download: %s at commit %s has no matching files", d.c.Repo, d.commit)
	}
	return files, nil
}

// pinFiles selects the pinned files from the hub's listing, refusing any
// that is missing or whose listed size or sha256 differs from the pin; the
// selected files carry the pinned sha256, so their content is checked
// against it.
func pinFiles(files, pins []RemoteFile, repo, commit string) ([]RemoteFile, error) {
	listed := map[string]RemoteFile{}
	for _, f := range files {
		listed[f.Name] = f
	}
	var sel []RemoteFile
	for _, p := range pins {
		f, ok := listed[p.Name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%s at commit %s has no %s, which the pinned release has", repo, commit, p.Name)
		case f.Size != p.Size:
			return nil, fmt.Errorf("%s at commit %s lists %s with %d bytes, the pinned release has %d", repo, commit, p.Name, f.Size, p.Size)
		case f.SHA256 != "" && f.SHA256 != p.SHA256:
			return nil, fmt.Errorf("%s at commit %s lists %s with sha256 %s, the pinned release has %s", repo, commit, p.Name, f.SHA256, p.SHA256)
		}
		f.SHA256 = p.SHA256
		sel = append(sel, f)
	}
	return sel, nil
}

// presentBytes estimates what is already on disk for f (for the free-space
// check): a finished file of the right size, or a .part's length.
func (d *downloader) presentBytes(f RemoteFile) int64 {
	p := filepath.Join(d.opt.Dest, filepath.FromSlash(f.Name))
	if st, err := os.Stat(p); err == nil && st.Size() == f.Size {
		return f.Size
	}
	if st, err := os.Stat(p + verify.PartSuffix); err == nil && st.Size() <= f.Size {
		return st.Size()
	}
	return 0
}

func (d *downloader) saveManifest() error {
	d.manMu.Lock()
	defer d.manMu.Unlock()
	if err := d.man.Write(d.opt.Dest); err != nil {
		return fatal("%v", err)
	}
	return nil
}

// expect reports whether sum (sha256 hex) and, for non-LFS files, the git
// blob id of the content at path match what the hub published, and what
// the check compared (verify.CheckedSHA256, CheckedGitBlob, or CheckedSize
// when the hub published no hash: then any content of the right size
// passes, and says so).
func expect(f RemoteFile, sum, path string) (bool, string, string) {
	ok, why := expectHash(f, sum, path)
	return ok, why, checkedBy(f)
}

func checkedBy(f RemoteFile) string {
	switch {
	case f.SHA256 != "":
		return verify.CheckedSHA256
	case len(f.BlobID) == 40:
		return verify.CheckedGitBlob
	}
	return verify.CheckedSize
}

// sizeOnlyMsg is how a file the hub published no hash for is reported.
const sizeOnlyMsg = "size checked, no published hash"

func expectHash(f RemoteFile, sum, path string) (bool, string) {
	if f.SHA256 != "" {
		if sum != f.SHA256 {
			return false, fmt.Sprintf("sha256 %s, hub says %s", sum, f.SHA256)
		}
		return true, ""
	}
	if f.BlobID == "" || len(f.BlobID) != 40 {
		return true, "" // nothing published to compare with beyond the size
	}
	fh, err := os.Open(path)
	if err != nil {
		return false, err.Error()
	}
	defer fh.Close()
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", f.Size)
	if _, err := io.Copy(h, fh); err != nil {
		return false, err.Error()
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.BlobID {
		return false, fmt.Sprintf("git blob id %s, hub says %s", got, f.BlobID)
	}
	return true, ""
}

// fetch brings one file to its verified final state, in three steps: keep
// a finished file that verifies, resume its .part, then transfer until
// the .part is complete and verifies.
func (d *downloader) fetch(ctx context.Context, f RemoteFile) FileResult {
	final := filepath.Join(d.opt.Dest, filepath.FromSlash(f.Name))
	ff := &fileFetch{d: d, f: f, res: FileResult{Name: f.Name, Size: f.Size}, final: final, part: final + verify.PartSuffix, h: sha256.New()}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		ff.res.Err = fatal("create %s: %v", filepath.Dir(final), err)
		return ff.res
	}
	if done, err := ff.keepFinished(ctx); err != nil || done {
		return ff.end(err)
	}
	if err := ff.resume(ctx); err != nil {
		return ff.end(err)
	}
	return ff.end(ff.transfer(ctx))
}

// fileFetch is one file's fetch.
type fileFetch struct {
	d           *downloader
	f           RemoteFile
	res         FileResult
	final, part string
	h           hash.Hash // SHA-256 of the .part's first have bytes
	have        int64
}

func (ff *fileFetch) setState(s FileState) {
	ff.d.tr.set(ff.f.Name, func(p *FileProgress) { p.State = s })
}

// end is the file's result: failed with err, or as it stands.
func (ff *fileFetch) end(err error) FileResult {
	if err != nil {
		ff.setState(StateFailed)
		ff.res.Err = err
	}
	return ff.res
}

// skipped marks the file done without a transfer.
func (ff *fileFetch) skipped(sum, msg string, sizeOnly bool) {
	d, f := ff.d, ff.f
	d.tr.have(f.Name, f.Size)
	d.tr.set(f.Name, func(p *FileProgress) { p.State, p.Skipped = StateDone, true })
	ff.res.SHA256, ff.res.Skipped = sum, true
	if sizeOnly {
		ff.res.SizeOnly, msg = true, "already present, "+sizeOnlyMsg
	}
	d.emit(Event{Kind: EventFileDone, File: f.Name, Message: msg})
}

// keepFinished keeps a finished file that the manifest records as verified
// (unchanged since) or that hashes right; a wrong one is removed to be
// fetched again (done false).
func (ff *fileFetch) keepFinished(ctx context.Context) (done bool, err error) {
	d, f, final := ff.d, ff.f, ff.final
	st, serr := os.Stat(final)
	if serr != nil {
		return false, nil
	}
	if st.Size() == f.Size {
		if e, ok := d.man.Lookup(f.Name); ok && e.Size == f.Size && e.Commit == d.commit &&
			(f.SHA256 == "" || e.SHA256 == f.SHA256) && e.ModTime == st.ModTime().UnixNano() &&
			(e.Checked == checkedBy(f) || e.Checked == "" && checkedBy(f) != verify.CheckedSize) {
			ff.skipped(e.SHA256, "already verified", e.Checked == verify.CheckedSize)
			return true, nil
		}
		ff.setState(StateChecking)
		sum, _, err := verify.HashFile(ctx, final, nil)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fatal("check %s: %v", final, err)
		}
		if ok, _, by := expect(f, sum, final); ok {
			if err := d.record(f, sum, final, by); err != nil {
				return false, err
			}
			ff.skipped(sum, "already present, hash verified", by == verify.CheckedSize)
			return true, nil
		}
		d.note("%s: on disk with the right size but the wrong content; fetching it again", f.Name)
	} else {
		d.note("%s: on disk with %d bytes, want %d; fetching it again", f.Name, st.Size(), f.Size)
	}
	d.man.Remove(f.Name)
	if err := os.Remove(final); err != nil {
		return false, fatal("remove bad %s: %v", final, err)
	}
	return false, nil
}

// resume takes up a .part: its bytes are hashed to continue from; one
// longer than the file or unreadable starts over.
func (ff *fileFetch) resume(ctx context.Context) error {
	d, f, part := ff.d, ff.f, ff.part
	st, err := os.Stat(part)
	if err != nil {
		d.tr.have(f.Name, 0)
		return nil
	}
	ff.have = st.Size()
	switch {
	case ff.have > f.Size:
		d.note("%s: %s is longer than the file (%d > %d); starting over", f.Name, filepath.Base(part), ff.have, f.Size)
		if err := os.Truncate(part, 0); err != nil {
			return fatal("truncate %s: %v", part, err)
		}
		ff.have = 0
	case ff.have > 0:
		ff.setState(StateChecking)
		if err := verify.HashPrefix(ctx, ff.h, part, ff.have, nil); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.note("%s: cannot read %s (%v); starting over", f.Name, filepath.Base(part), err)
			ff.h.Reset()
			ff.have = 0
			if err := os.Truncate(part, 0); err != nil {
				return fatal("truncate %s: %v", part, err)
			}
		}
	}
	d.tr.have(f.Name, ff.have)
	return nil
}

// transfer fetches until the .part is complete and verifies, then gives
// the file its name. A hash mismatch after a complete transfer restarts
// the file once.
func (ff *fileFetch) transfer(ctx context.Context) error {
	d, f, part := ff.d, ff.f, ff.part
	for round := 0; ; round++ {
		if ff.have < f.Size || f.Size == 0 && !exists(part) {
			// on success the .part is complete: verification decides
			if _, err := d.transfer(ctx, f, part, ff.h, ff.have); err != nil {
				return err
			}
		}
		ff.setState(StateVerifying)
		sum := hex.EncodeToString(ff.h.Sum(nil))
		ok, why, by := expect(f, sum, part)
		if ok {
			if err := d.finish(f, sum, part, ff.final, by); err != nil {
				return err
			}
			ff.res.SHA256 = sum
			ff.setState(StateDone)
			msg := ""
			if by == verify.CheckedSize {
				ff.res.SizeOnly, msg = true, sizeOnlyMsg
			}
			d.emit(Event{Kind: EventFileDone, File: f.Name, Message: msg})
			return nil
		}
		if err := os.Remove(part); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fatal("remove %s: %v", part, err)
		}
		if round >= 1 {
			return fatal("%s: downloaded twice and the content is still wrong (%s); the hub or a proxy serves bad data: try later or another --endpoint", f.Name, why)
		}
		d.note("%s: complete but wrong (%s); deleted the .part, fetching again", f.Name, why)
		ff.h.Reset()
		ff.have = 0
		d.tr.have(f.Name, 0)
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// record writes f's manifest entry; checked says what its content was
// compared with.
func (d *downloader) record(f RemoteFile, sum, final, checked string) error {
	st, err := os.Stat(final)
	if err != nil {
		return fatal("stat %s: %v", final, err)
	}
	d.man.Set(verify.ManifestEntry{Name: f.Name, Size: f.Size, SHA256: sum, Commit: d.commit, ModTime: st.ModTime().UnixNano(), Checked: checked})
	return d.saveManifest()
}

// finish fsyncs the .part, renames it to its final name, fsyncs the
// directory and records the file.
func (d *downloader) finish(f RemoteFile, sum, part, final, checked string) error {
	fh, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fatal("open %s: %v", part, err)
	}
	serr := fh.Sync()
	cerr := fh.Close()
	if serr != nil || cerr != nil {
		return fatal("fsync %s: %v", part, errors.Join(serr, cerr))
	}
	if err := os.Rename(part, final); err != nil {
		return fatal("rename %s to %s: %v", part, filepath.Base(final), err)
	}
	if dh, err := os.Open(filepath.Dir(final)); err == nil {
		_ = dh.Sync()
		dh.Close()
	}
	return d.record(f, sum, final, checked)
}

// fileURL is {endpoint}/{repo}/resolve/{commit}/{path}.
func (d *downloader) fileURL(name string) string {
	parts := strings.Split(name, "/")
	for i := range parts {
		parts[i] = url.PathEscape(parts[i])
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", d.c.Endpoint, d.c.Repo, d.commit, strings.Join(parts, "/"))
}

// transfer appends to part from byte have until the file is complete,
// retrying with backoff; h holds the hash of the bytes already in part.
func (d *downloader) transfer(ctx context.Context, f RemoteFile, part string, h hash.Hash, have int64) (int64, error) {
	fh, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return have, fatal("open %s: %v", part, err)
	}
	defer fh.Close()
	d.tr.set(f.Name, func(p *FileProgress) { p.State = StateDownloading })
	d.emit(Event{Kind: EventStart, File: f.Name, Message: resumeMsg(have, f.Size)})
	t := &transfer{d: d, f: f, part: part, fh: fh, h: h, have: have, buf: make([]byte, 1<<20)}
	onRetry := func(attempt int, wait time.Duration, err error) {
		d.tr.set(f.Name, func(p *FileProgress) { p.State, p.Attempt = StateRetrying, attempt })
		d.emit(Event{Kind: EventRetry, File: f.Name, Attempt: attempt, Wait: wait, Err: err})
	}
	err = d.c.retry(ctx, f.Name, func() (bool, error) {
		d.tr.set(f.Name, func(p *FileProgress) { p.State = StateDownloading })
		return t.attempt(ctx)
	}, onRetry)
	return t.have, err
}

// transfer is one file's transfer into its .part, over as many attempts
// as the retry policy allows; have is the .part's length, h its hash so
// far.
type transfer struct {
	d           *downloader
	f           RemoteFile
	part        string
	fh          *os.File
	h           hash.Hash
	have        int64
	buf         []byte
	restarts416 int
}

// restart empties the .part: the file starts again from byte 0.
func (t *transfer) restart() error {
	if err := t.d.restart(t.fh, t.f, t.h); err != nil {
		return err
	}
	t.have = 0
	return nil
}

// attempt is one request for the rest of the file; progress says whether
// it got bytes (the retry policy counts attempts without progress).
func (t *transfer) attempt(ctx context.Context) (progress bool, err error) {
	d, f := t.d, t.f
	start := t.have
	hdr := http.Header{}
	if t.have > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(t.have, 10)+"-")
	}
	var hubHdr http.Header
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	resp, err := d.c.get(rctx, d.fileURL(f.Name), hdr, &hubHdr)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if err := d.checkHubHeaders(f, hubHdr); err != nil {
		return false, err
	}
	if more, err := t.answer(resp, start); !more || err != nil {
		return false, err
	}
	err = t.stream(ctx, rctx, rcancel, resp.Body)
	return t.have > start, err
}

// answer reads the status of the server's answer; more says whether its
// body is the rest of the file to stream.
func (t *transfer) answer(resp *http.Response, start int64) (more bool, err error) {
	d, f := t.d, t.f
	switch resp.StatusCode {
	case http.StatusOK:
		if t.have > 0 {
			d.note("%s: the server ignored the byte range; restarting the file from 0", f.Name)
			if err := t.restart(); err != nil {
				return false, err
			}
		}
		if resp.ContentLength >= 0 && resp.ContentLength != f.Size {
			return false, errRetry{fmt.Errorf("server sends %d bytes, the file is %d", resp.ContentLength, f.Size)}
		}
	case http.StatusPartialContent:
		s, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || s != t.have || (total >= 0 && total != f.Size) {
			return false, errRetry{fmt.Errorf("server answered range %d- with %q", t.have, resp.Header.Get("Content-Range"))}
		}
	case http.StatusRequestedRangeNotSatisfiable:
		_, total, _ := parseContentRange(resp.Header.Get("Content-Range"))
		if t.have == f.Size && (total < 0 || total == f.Size) {
			return false, nil // complete: verification decides
		}
		t.restarts416++
		if t.restarts416 > 2 {
			return false, fatal("%s: the server keeps refusing byte ranges (HTTP 416) at byte %d of %d; delete %s and re-run", f.Name, t.have, f.Size, filepath.Base(t.part))
		}
		d.note("%s: server refused the range from byte %d (HTTP 416, it reports %d bytes); restarting the file", f.Name, t.have, total)
		if err := t.restart(); err != nil {
			return false, err
		}
		return false, errRetry{fmt.Errorf("HTTP 416 at byte %d", start)}
	default:
		return false, d.c.httpError(resp, "file "+f.Name)
	}
	return true, nil
}

// stream writes the body to the .part and hashes it, aborting (rcancel)
// when it stalls.
func (t *transfer) stream(ctx, rctx context.Context, rcancel context.CancelFunc, body io.Reader) error {
	d, f := t.d, t.f
	stall := time.AfterFunc(d.c.stall(), rcancel)
	defer stall.Stop()
	for t.have < f.Size {
		n, rerr := body.Read(t.buf)
		if n > 0 {
			stall.Reset(d.c.stall())
			if err := t.write(n); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if rctx.Err() != nil {
				rerr = fmt.Errorf("no data for %s", d.c.stall())
			}
			return errRetry{fmt.Errorf("connection lost at byte %d of %d: %v", t.have, f.Size, rerr)}
		}
	}
	if t.have < f.Size {
		return errRetry{fmt.Errorf("transfer ended at byte %d of %d", t.have, f.Size)}
	}
	return nil
}

// write puts the buffer's first n bytes at the end of the .part.
func (t *transfer) write(n int) error {
	f := t.f
	if t.have+int64(n) > f.Size {
		// More bytes than the file has: the .part would be wrong.
		if err := t.restart(); err != nil {
			return err
		}
		return errRetry{fmt.Errorf("server sent more than the file's %d bytes; restarting it", f.Size)}
	}
	if _, werr := t.fh.WriteAt(t.buf[:n], t.have); werr != nil {
		if direct.DiskFull(werr) { // ENOSPC, or ERROR_DISK_FULL on Windows
			return fatal("disk full writing %s at byte %d: free some space and re-run; the .part is kept and resumes: %w", t.part, t.have, syscall.ENOSPC)
		}
		return fatal("write %s at byte %d: %v", t.part, t.have, werr)
	}
	t.h.Write(t.buf[:n])
	t.have += int64(n)
	t.d.tr.got(f.Name, int64(n))
	return nil
}

func resumeMsg(have, size int64) string {
	if have > 0 {
		return fmt.Sprintf("resuming at %s of %s", units.Bytes(have), units.Bytes(size))
	}
	return ""
}

// restart empties the .part and the running hash.
func (d *downloader) restart(fh *os.File, f RemoteFile, h hash.Hash) error {
	if err := fh.Truncate(0); err != nil {
		return fatal("truncate %s.part: %v", f.Name, err)
	}
	h.Reset()
	d.tr.have(f.Name, 0)
	return nil
}

// checkHubHeaders compares the hub's X-Repo-Commit, X-Linked-Size and
// X-Linked-Etag with the pinned metadata.
func (d *downloader) checkHubHeaders(f RemoteFile, h http.Header) error {
	if h == nil {
		return nil
	}
	if c := h.Get("X-Repo-Commit"); c != "" && c != d.commit {
		return fatal("%s: hub served commit %s, the download is pinned to %s", f.Name, c, d.commit)
	}
	if s := h.Get("X-Linked-Size"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n != f.Size {
			return fatal("%s: hub says %d bytes (X-Linked-Size), the file list said %d; the repository changed under the pinned commit?", f.Name, n, f.Size)
		}
	}
	if e := normEtag(h.Get("X-Linked-Etag")); e != "" && f.SHA256 != "" && e != f.SHA256 {
		return fatal("%s: hub's X-Linked-Etag %s differs from the listed sha256 %s", f.Name, e, f.SHA256)
	}
	return nil
}

func normEtag(e string) string {
	e = strings.TrimPrefix(strings.TrimSpace(e), "W/")
	return strings.ToLower(strings.Trim(e, `"`))
}

// parseContentRange parses "bytes START-END/TOTAL" or "bytes */TOTAL";
// total is -1 for "*".
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return 0, -1, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, -1, false
	}
	total = -1
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t < 0 {
			return 0, -1, false
		}
		total = t
	}
	if rng == "*" {
		return -1, total, true
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, -1, false
	}
	st, err1 := strconv.ParseInt(a, 10, 64)
	en, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || st < 0 || en < st {
		return 0, -1, false
	}
	return st, total, true
}
