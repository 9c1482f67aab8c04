package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k3/storage/units"
	"k3/storage/verify"
)

func init() {
	register("verify", "check a model directory: files, sizes, optional SHA-256", runVerify)
}

// storeInterrupt is cancelled by Ctrl-C (and SIGTERM on Unix).
func storeInterrupt() (context.Context, func()) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	c, code := parseVerify(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	if c.logits {
		return verifyLogits(c.dir, c.golden, c.ids, c.mf, stdout, stderr)
	}
	return c.run(stdout, stderr)
}

// verifyConfig is a k3 verify command line, read and checked.
type verifyConfig struct {
	dir    string
	opt    verify.Options
	asJSON bool
	// --logits: run the model on the golden's ids (golden, ids, mf)
	logits      bool
	golden, ids string
	mf          *modelFlags
}

// parseVerify reads k3 verify's flags; a code >= 0 is the exit code after
// the message.
func parseVerify(args []string, stdout, stderr io.Writer) (verifyConfig, int) {
	var c verifyConfig
	fs := newFlags("verify", stderr)
	sha := fs.Bool("sha256", false, "hash every file and compare with k3-manifest.json (reads the whole checkpoint)")
	c.mf = addModelFlags(fs, "verify") // --layers: the shards the first N layers need; with --logits, the layers run
	layers := c.mf.layers
	logits := fs.Bool("logits", false, "run the model on the golden's ids and compare the logits with the published ones (--golden DIR)")
	goldenDir := fs.String("golden", "", "with --logits: the directory of ref_logits.json (the released checkpoint's is testdata/seed-v1/golden in the k3 source)")
	idsFlag := fs.String("ids", "", "with --logits: the ids to run (default and only accepted: the golden's, e.g. 3,4,5,6,7)")
	jobs := fs.Int("jobs", 0, "files hashed in parallel (default min(4, cores))")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	setUsage(fs, stderr,
		"usage: k3 verify MODEL_DIR [--sha256] [--layers N] [--json]",
		"       k3 verify MODEL_DIR --logits --golden DIR [--ids 3,4,5,6,7] [--layers N] [model flags]",
		"Checks the released file set (96 shards with exact sizes, config.json, tiktoken.model,",
		"tokenizer_config.json). Exit 0 only when everything needed is present and right.",
		"A DSpark drafter's folder (k3 download DEST --draft) is checked as one: config.json complete,",
		"model.safetensors whole, sizes and --sha256 against its k3-manifest.json.",
		"With --logits it runs the model on the golden's ids and compares the last position's logits",
		"with the published ones (worst |diff| relative to max|ref| within 5.1e-4, same argmax):",
		"exit 0 match, 1 mismatch.",
	)
	pos, code := parseN(fs, args, 1, stderr, "")
	if code >= 0 {
		return c, code
	}
	c.dir, c.logits, c.golden, c.ids, c.asJSON = pos[0], *logits, *goldenDir, *idsFlag, *asJSON
	c.opt = verify.Options{SHA256: *sha, Layers: *layers, Jobs: *jobs}
	if c.logits {
		if c.golden == "" {
			fmt.Fprintln(stderr, "k3 verify: --logits needs --golden DIR (the released checkpoint's is testdata/seed-v1/golden in the k3 source)")
			return c, ExitUsage
		}
		return c, c.mf.resolve(fs, stdout, stderr)
	}
	if *layers < 0 {
		fmt.Fprintln(stderr, "k3 verify: --layers must be >= 1")
		return c, ExitUsage
	}
	if *layers > 0 && verify.IsDraftFolder(c.dir) {
		fmt.Fprintf(stderr, "k3 verify: %s holds a draft model; --layers applies to the main model only\n", c.dir)
		return c, ExitUsage
	}
	return c, -1
}

// run checks the folder (the same check as the app's Verify) and reports:
// exit 0 only when it is complete.
func (c verifyConfig) run(stdout, stderr io.Writer) int {
	ctx, stop := storeInterrupt()
	defer stop()
	opt := c.opt
	if opt.SHA256 && !c.asJSON {
		opt.Progress = hashProgress(stderr)
	}
	rep, err := verify.CheckFolder(ctx, c.dir, opt)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "k3 verify: interrupted")
			return ExitInterrupted
		}
		fmt.Fprintf(stderr, "k3 verify: %v\n", err)
		return ExitRuntime
	}
	if c.asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return ExitOutput
		}
	} else {
		printVerify(stdout, rep)
	}
	if !rep.Complete {
		return ExitRuntime
	}
	return ExitOK
}

// hashProgress prints the hashing's progress at most every 5 seconds (and
// at the end).
func hashProgress(w io.Writer) func(done, total int64) {
	var mu sync.Mutex
	var last time.Time
	start := time.Now()
	return func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < 5*time.Second && done < total {
			return
		}
		last = time.Now()
		el := time.Since(start).Seconds()
		fmt.Fprintf(w, "hashing: %s of %s (%s)\n", units.Bytes(done), units.Bytes(total), units.PerSec(float64(done)/max(el, 1e-9)))
	}
}

func printVerify(w io.Writer, rep *verify.Report) {
	what := "the full model"
	if rep.Draft {
		what = "a DSpark draft model"
	} else if rep.Layers > 0 {
		what = fmt.Sprintf("the first %d layers", rep.Layers)
	}
	fmt.Fprintf(w, "verify %s (%s)\n", rep.Dir, what)
	for _, f := range rep.Files {
		switch f.Status {
		case verify.StatusOK, verify.StatusKnown:
			continue
		}
		line := fmt.Sprintf("  %-13s %s", f.Status, f.Name)
		if f.Detail != "" {
			line += ": " + f.Detail
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "%d of %d required files ok, %.3f of %.3f TB", rep.OK, rep.Required, float64(rep.Bytes)/1e12, float64(rep.WantBytes)/1e12)
	var parts []string
	for _, p := range []struct {
		n    int
		name string
	}{{rep.Missing, "missing"}, {rep.WrongSize, "wrong size"}, {rep.HashBad, "hash mismatch"}, {rep.NoHash, "no recorded hash"}, {rep.Unreadable, "unreadable"}, {rep.Partial, "partial downloads"}, {rep.Extra, "extra"}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.name))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "; %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if rep.Hashed {
		fmt.Fprintf(w, "sha256 checked against %s (commit %s)\n", verify.ManifestFile, rep.Commit)
	} else {
		fmt.Fprintln(w, "sizes checked; add --sha256 to check content against the download manifest")
	}
	switch {
	case rep.Complete:
		fmt.Fprintln(w, "COMPLETE")
	case rep.Draft:
		fmt.Fprintf(w, "INCOMPLETE: run 'k3 download %s --draft' to fetch or repair the released drafter\n", storeQuote(filepath.Dir(filepath.Clean(rep.Dir))))
	default:
		fmt.Fprintf(w, "INCOMPLETE: run 'k3 download %s' to fetch or repair what is missing\n", storeQuote(rep.Dir))
	}
}

// storeQuote quotes s for a POSIX shell when it needs it.
func storeQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"$`\\|&;<>()*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
