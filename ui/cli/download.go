package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k3/storage/hub"
	"k3/storage/units"
	"k3/storage/verify"
	"k3/ui/bridge"
)

func init() {
	register("download", "download the checkpoint (resumable, pinned, verified)", runDownload)
}

// downloadNewClient builds the hub client; tests replace it to shorten the
// backoff.
var downloadNewClient = hub.NewClient

// downloadProbes is how many times k3 download checks that the hub can be
// reached before it gives up; downloadProbeWait the pause after check
// number attempt (nil: the app's, 5 s more each time). Tests shorten it.
var (
	downloadProbes                                    = 4
	downloadProbeWait func(attempt int) time.Duration = nil
)

// downloadDraftPins are the drafter files `k3 download DEST --draft` expects
// (tests replace them with their fake release's).
var downloadDraftPins = hub.DraftFiles

func runDownload(args []string, stdout, stderr io.Writer) int {
	c, code := parseDownload(args, stderr)
	if code >= 0 {
		return code
	}
	return c.run(stdout, stderr)
}

// downloadConfig is a k3 download command line, read and checked.
type downloadConfig struct {
	dest     string // where the files go (DEST/draft with --draft)
	given    string // DEST as given
	opt      hub.Options
	endpoint string
	repo     string
	interval time.Duration // between progress lines
	draft    bool
}

// parseDownload reads k3 download's flags; a code >= 0 is the exit code
// after the message.
func parseDownload(args []string, stderr io.Writer) (downloadConfig, int) {
	var c downloadConfig
	fs := newFlags("download", stderr)
	layers := fs.Int("layers", 0, "fetch only the shards the first N layers need, plus config and tokenizer files")
	rev := fs.String("revision", "main", "branch, tag or 40-hex commit; a branch is resolved once and pinned in k3-manifest.json")
	jobs := fs.Int("jobs", 4, "files downloaded in parallel")
	endpoint := fs.String("endpoint", "", "hub base URL (default $HF_ENDPOINT or https://huggingface.co)")
	repo := fs.String("repo", hub.DefaultRepo, "repository")
	interval := fs.Duration("progress", 5*time.Second, "interval between progress lines")
	draft := fs.Bool("draft", false, "fetch the released DSpark drafter ("+hub.DraftRepo+" at its pinned commit) into DEST/draft")
	setUsage(fs, stderr,
		"usage: k3 download DEST [--layers N] [--revision REV] [--jobs N] [--endpoint URL] [--draft]",
		"Downloads Kimi K3 into DEST (with --draft: its DSpark drafter into DEST/draft, every file's",
		"size and SHA-256 checked against the pinned release). Re-run the same command to resume: finished files are kept,",
		"partial ones continue where they stopped. A token is read from HF_TOKEN or",
		"~/.cache/huggingface/token (HF_TOKEN_PATH) and never printed.",
	)
	pos, code := parseN(fs, args, 1, stderr, "")
	if code >= 0 {
		return c, code
	}
	if *layers < 0 || *jobs < 1 || *jobs > 64 {
		fmt.Fprintln(stderr, "k3 download: --layers must be >= 1 and --jobs between 1 and 64")
		return c, ExitUsage
	}
	downloadCVariables(fs, rev, *draft, stderr)
	c = downloadConfig{dest: pos[0], given: pos[0], endpoint: *endpoint, repo: *repo, interval: *interval, draft: *draft,
		opt: hub.Options{Revision: *rev, Layers: *layers, Jobs: *jobs, Interval: time.Second}}
	if c.draft {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["layers"] || set["revision"] || set["repo"] {
			fmt.Fprintln(stderr, "k3 download: --draft fetches the pinned drafter release; it takes no --layers, --revision or --repo")
			return c, ExitUsage
		}
		c.repo, c.opt.Revision, c.opt.Pinned = hub.DraftRepo, hub.DraftRevision, downloadDraftPins
		c.dest = filepath.Join(c.dest, "draft")
	}
	c.opt.Dest = c.dest
	return c, -1
}

// downloadCVariables honours the C engine's download script's variables:
// K3_REVISION as --revision (a flag given wins; --draft is pinned), and
// K3_SKIP_CHECKSUM is warned about, since k3 hashes each file as it
// arrives and has no second pass to skip.
func downloadCVariables(fs *flag.FlagSet, rev *string, draft bool, stderr io.Writer) {
	if v := os.Getenv("K3_REVISION"); v != "" && !draft {
		if flagGiven(fs, "revision") {
			fmt.Fprintf(stderr, "note: K3_REVISION=%s (the C engine's variable): --revision %s wins over it\n", v, *rev)
		} else {
			*rev = v
			fmt.Fprintf(stderr, "note: K3_REVISION=%s (the C engine's variable): downloading revision %s, as --revision %s\n", v, v, v)
		}
	}
	if v := os.Getenv("K3_SKIP_CHECKSUM"); v != "" {
		fmt.Fprintf(stderr, "warning: K3_SKIP_CHECKSUM=%s (the C engine's variable) is ignored: k3 download checks each file's size and SHA-256 as it arrives, so there is no second pass to skip\n", v)
	}
}

// run checks the hub can be reached, downloads, and reports.
func (c downloadConfig) run(stdout, stderr io.Writer) int {
	cleanStaleFiles(stdout, "download", filepath.Join(c.dest, verify.ManifestFile))
	hc := downloadNewClient(c.endpoint, c.repo)
	ctx, stop := storeInterrupt()
	defer stop()
	fmt.Fprintf(stdout, "downloading %s@%s from %s into %s (%s)\n", hc.Repo, c.opt.Revision, hc.Endpoint, c.dest, hc.Token)
	rend := &downloadRenderer{w: stdout, every: c.interval}
	// the app's reachability check, a few times: "cannot reach the hub"
	// rather than a raw network error
	err := bridge.WaitReachable(ctx, hc.Endpoint, downloadProbes, downloadProbeWait, rend.event)
	var res *hub.Result
	if err == nil {
		opt := c.opt
		opt.Progress = rend.event
		res, err = hc.Download(ctx, opt)
	}
	if err != nil {
		return downloadFailed(ctx, err, stderr)
	}
	c.report(stdout, res)
	return ExitOK
}

// downloadFailed says why the download stopped and gives its exit code.
func downloadFailed(ctx context.Context, err error, stderr io.Writer) int {
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "k3 download: interrupted; run the same command again to resume (finished files are kept)\n")
		return ExitInterrupted
	}
	var ue *bridge.UnreachableError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "k3 download: cannot reach the model hub (%s): %v, after %d tries. Check the network connection and run the same command again.\n", ue.Host, ue.Err, downloadProbes)
		return ExitRuntime
	}
	fmt.Fprintf(stderr, "k3 download: %v\n", err)
	var he *hub.HTTPError
	if errors.As(err, &he) && (he.Status == 401 || he.Status == 403 || he.Status == 404) {
		return ExitUsage
	}
	return ExitRuntime
}

// report prints what was fetched and what to run next.
func (c downloadConfig) report(stdout io.Writer, res *hub.Result) {
	fetched := 0
	var sizeOnly []string
	for _, f := range res.Files {
		if !f.Skipped {
			fetched++
		}
		if f.SizeOnly {
			sizeOnly = append(sizeOnly, f.Name)
		}
	}
	el := res.Elapsed.Seconds()
	fmt.Fprintf(stdout, "done: %d files (%s) at commit %s, %d fetched (%s in %s, %s), %d already verified\n",
		len(res.Files), units.Bytes(res.Total), res.Commit, fetched, units.Bytes(res.Fetched), res.Elapsed.Round(time.Second), units.PerSec(float64(res.Fetched)/max(el, 1e-9)), len(res.Files)-fetched)
	if len(sizeOnly) > 0 {
		fmt.Fprintf(stdout, "note: the hub published no hash for %d file(s), so only their size was checked: %s (k3 verify --sha256 does not count them as verified)\n",
			len(sizeOnly), strings.Join(sizeOnly, ", "))
	}
	fmt.Fprintf(stdout, "manifest: %s/%s\n", strings.TrimRight(c.dest, "/"), verify.ManifestFile)
	switch {
	case c.draft:
		fmt.Fprintf(stdout, "next: k3 verify %s --sha256, then k3 run %s --draft %s\n", storeQuote(c.dest), storeQuote(c.given), storeQuote(c.dest))
	case c.opt.Layers > 0:
		fmt.Fprintf(stdout, "next: k3 verify %s --layers %d --sha256\n", storeQuote(c.dest), c.opt.Layers)
	default:
		fmt.Fprintf(stdout, "next: k3 verify %s --sha256\n", storeQuote(c.dest))
	}
}

// downloadRenderer turns hub events into lines: one per finished file,
// retries and notes as they happen, and an overall line (with the largest
// active files) every `every`.
type downloadRenderer struct {
	w     io.Writer
	every time.Duration
	mu    sync.Mutex
	last  time.Time
}

func (r *downloadRenderer) event(e hub.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := e.Snap
	switch e.Kind {
	case hub.EventPlan, hub.EventNote:
		fmt.Fprintln(r.w, e.Message)
	case hub.EventStart:
		if e.Message != "" {
			fmt.Fprintf(r.w, "%s: %s\n", e.File, e.Message)
		}
	case hub.EventRetry:
		what := e.File
		if what == "" {
			what = "the hub"
		}
		fmt.Fprintf(r.w, "%s: attempt %d failed (%v); retrying in %s\n", what, e.Attempt, e.Err, e.Wait.Round(time.Millisecond))
	case hub.EventFileDone:
		note := "verified"
		if e.Message != "" {
			note = e.Message
		}
		fmt.Fprintf(r.w, "[%d/%d] %s %s\n", s.FilesDone, s.FilesTotal, e.File, note)
	case hub.EventProgress:
		if time.Since(r.last) < r.every {
			return
		}
		r.last = time.Now()
		line := fmt.Sprintf("%s of %s (%.1f%%), %s, ETA %s", units.Bytes(s.Done), units.Bytes(s.Total), 100*float64(s.Done)/max(float64(s.Total), 1), units.PerSec(s.Rate), etaStr(s.ETA))
		act := s.Active()
		for i, f := range act {
			if i == 3 {
				line += fmt.Sprintf(" | +%d more", len(act)-3)
				break
			}
			line += fmt.Sprintf(" | %s %.0f%% %s ETA %s", shortName(f.Name), 100*float64(f.Done)/max(float64(f.Total), 1), units.PerSec(f.Rate), etaStr(f.ETA))
		}
		fmt.Fprintln(r.w, line)
	}
}

func shortName(n string) string {
	n = strings.TrimSuffix(n, ".safetensors")
	return strings.Replace(n, "model-", "", 1)
}

func etaStr(d time.Duration) string {
	if d < 0 {
		return "unknown"
	}
	return d.Round(time.Second).String()
}
