package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k3/storage/trunk"
	"k3/storage/units"
)

func init() {
	register("pack", "pack the dense trunk into one file for fast layer streaming (resumable)", runPack)
}

// runPack is `k3 pack MODEL_DIR TRUNK_DIR`. Exit codes: 0 packed (or
// already complete), 1 runtime failure (I/O, not a K3 checkpoint, disk too
// small), 2 usage or a refused trunk directory (another checkpoint's trunk,
// a corrupt trunk.json: --force), 3 TRUNK_DIR not writable, 5 interrupted
// (run the same command again to resume).
func runPack(args []string, stdout, stderr io.Writer) int {
	c, code := parsePack(args, stderr)
	if code >= 0 {
		return code
	}
	plan, code := c.prepare(stdout, stderr)
	if code >= 0 {
		return code
	}
	ctx, stop := storeInterrupt()
	defer stop()
	res, code := c.pack(ctx, plan, stdout, stderr)
	if code >= 0 {
		return code
	}
	c.report(ctx, res, stdout, stderr)
	return ExitOK
}

// packConfig is a parsed `k3 pack` command line.
type packConfig struct {
	model, dir             string
	force, compress, quiet bool
	bufMB, diskMB, layers  int
	measure                bool // --measure, or --disk-test-mb given
}

// parsePack reads and checks the flags; it returns an exit code, or -1
// with the configuration.
func parsePack(args []string, stderr io.Writer) (*packConfig, int) {
	fs := newFlags("pack", stderr)
	force := fs.Bool("force", false, "discard whatever TRUNK_DIR holds (another checkpoint's trunk, an interrupted pack, a corrupt trunk.json, a trunk packed with the other --compress setting) and pack from scratch")
	compress := fs.Bool("compress", false, "store the weight matrices losslessly compressed: a smaller trunk (about 1.25x on trained weights) that gives exactly the same output; fewer bytes to read per token and more layers fit in memory")
	bufMB := fs.Int("buffer-mb", trunk.DefaultBufferSize>>20, "I/O request size in MiB (the pack holds three huge-page buffers of this size)")
	measure := fs.Bool("measure", false, "after packing, time the disk's own sequential O_DIRECT read of the checkpoint and write (+fsync) to TRUNK_DIR, to compare the pack with")
	diskMB := fs.Int("disk-test-mb", 1024, "with --measure: MiB read and written by the disk test (at most the trunk's size; 0 skips)")
	quiet := fs.Bool("quiet", false, "no progress line")
	layers := fs.Int("layers", 0, "pack only the first N layers (0: all), for k3 run --layers N; a partial shard set (k3 download --layers N) packs when it holds them")
	setUsage(fs, stderr,
		"usage: k3 pack MODEL_DIR TRUNK_DIR [--compress] [--force] [--layers N] [--buffer-mb N] [--measure [--disk-test-mb N]] [--quiet]",
		"Packs the dense trunk (embeddings, head, final norms and every layer without its routed",
		"experts) into TRUNK_DIR/trunk.bin + trunk.json, one aligned run per layer, for k3 run --trunk.",
		"An interrupted pack resumes where it stopped; a complete trunk of the same checkpoint is kept.",
		"With --compress the weight matrices are stored compressed without losing a bit: every weight",
		"reads back exactly, so k3 run gives the same output, from fewer bytes. A folder that holds a",
		"trunk packed the other way is refused (use --force to replace it).",
		"exit codes: 0 ok, 1 failure, 2 usage or refused TRUNK_DIR (see --force), 3 TRUNK_DIR not writable, 5 interrupted",
	)
	pos, code := parseN(fs, args, 2, stderr, "")
	if code >= 0 {
		return nil, code
	}
	for _, bad := range []struct {
		is  bool
		msg string
	}{
		{*bufMB < 1 || *bufMB > 1024, "--buffer-mb must be 1..1024"},
		{*layers < 0, "--layers must be 0 (all) or more"},
		{*diskMB < 0, "--disk-test-mb must be >= 0"},
	} {
		if bad.is {
			fmt.Fprintln(stderr, "k3 pack: "+bad.msg)
			return nil, ExitUsage
		}
	}
	return &packConfig{model: pos[0], dir: pos[1], force: *force, compress: *compress, quiet: *quiet,
		bufMB: *bufMB, diskMB: *diskMB, layers: *layers, measure: *measure || flagGiven(fs, "disk-test-mb")}, -1
}

// prepare plans the trunk's runs and readies TRUNK_DIR: made, writable,
// the stale files of an earlier run removed.
func (c *packConfig) prepare(stdout, stderr io.Writer) (*trunk.Manifest, int) {
	if st, err := os.Stat(c.model); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "k3 pack: %s is not a model directory\n", c.model)
		return nil, ExitUsage
	}
	plan, err := trunk.PlanLayers(c.model, c.layers)
	if err != nil {
		fmt.Fprintf(stderr, "k3 pack: %v\n", err)
		return nil, ExitRuntime
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "k3 pack: %v\n", err)
		return nil, ExitOutput
	}
	if err := checkWritable(filepath.Join(c.dir, trunk.BinFile)); err != nil {
		fmt.Fprintf(stderr, "k3 pack: %s is not writable: %v\n", c.dir, err)
		return nil, ExitOutput
	}
	removed, serr := trunk.CleanStale(c.dir)
	noteStale(stdout, "pack", removed, serr)
	return plan, -1
}

// pack packs the trunk with a progress line; a code >= 0 is the exit code
// after the message.
func (c *packConfig) pack(ctx context.Context, plan *trunk.Manifest, stdout, stderr io.Writer) (*trunk.Result, int) {
	size := units.Bytes(plan.TotalBytes)
	if c.compress {
		size += " uncompressed, compressed: smaller by a ratio known once packed"
	}
	fmt.Fprintf(stdout, "k3 pack: %s -> %s: %d runs (embed, head, final, %d layers), %s\n",
		c.model, c.dir, len(plan.Runs), plan.Layers(), size)
	r := &packRenderer{w: stderr, tty: isTerminal(stderr), start: time.Now()}
	r.every = 5 * time.Second
	if r.tty {
		r.every = 250 * time.Millisecond
	}
	opt := trunk.Options{Force: c.force, Compress: c.compress, BufferSize: c.bufMB << 20, Layers: c.layers}
	if !c.quiet {
		opt.Progress = r.update
	}
	res, err := trunk.Pack(ctx, c.model, c.dir, opt)
	r.finish()
	if err != nil {
		return nil, c.failed(ctx, err, stderr)
	}
	return res, -1
}

// failed says why the pack stopped and returns its exit code.
func (c *packConfig) failed(ctx context.Context, err error, stderr io.Writer) int {
	var se *trunk.SpaceError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "k3 pack: interrupted; what was packed is kept in %s: run the same command again to resume\n", filepath.Join(c.dir, trunk.PartialFile))
		return ExitInterrupted
	case errors.Is(err, trunk.ErrSourceMismatch):
		fmt.Fprintf(stderr, "k3 pack: refused: %v\n", err)
		return ExitUsage
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "k3 pack: %v\n", err)
		return ExitRuntime
	case errors.Is(err, trunk.ErrRefused):
		fmt.Fprintf(stderr, "k3 pack: refused: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "k3 pack: %v\n", err)
	return ExitRuntime
}

// report prints what the pack did (or that the trunk was complete), the
// disk's own speed when asked for, and the command that runs the trunk.
func (c *packConfig) report(ctx context.Context, res *trunk.Result, stdout, stderr io.Writer) {
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	if res.UpToDate {
		what := ""
		if res.Manifest.Compressed() {
			what = "compressed, "
		}
		fmt.Fprintf(stdout, "%s is already complete for this checkpoint (%s%s); nothing to do (--force repacks)\n",
			filepath.Join(c.dir, trunk.ManifestFile), what, units.Bytes(res.Manifest.TotalBytes))
		return
	}
	printPackSummary(stdout, res, c.diskSpeed(ctx, res, stderr))
	if res.Manifest.Compressed() {
		printCompression(stdout, res.Manifest)
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(c.dir, trunk.ManifestFile))
	next := ""
	if c.layers > 0 {
		next = fmt.Sprintf(" --layers %d", c.layers)
	}
	fmt.Fprintf(stdout, "next: k3 run %s --trunk %s%s --prompt 'Hello'\n", storeQuote(c.model), storeQuote(c.dir), next)
}

// diskSpeed is the disk's own speed, only when asked for (it writes and
// fsyncs as much again), measured after the pack so a refused or
// interrupted pack wastes nothing on it, and never more than the trunk's
// size (nil when not measured).
func (c *packConfig) diskSpeed(ctx context.Context, res *trunk.Result, stderr io.Writer) *trunk.DiskSpeed {
	if !c.measure || c.diskMB <= 0 {
		return nil
	}
	n := min(int64(c.diskMB)<<20, max(res.BytesWritten, 1))
	disk, err := trunk.MeasureDisk(ctx, c.model, c.dir, n, n, c.bufMB<<20)
	if err != nil {
		fmt.Fprintf(stderr, "k3 pack: disk speed test skipped: %v\n", err)
		return nil
	}
	return disk
}

func ioMode(direct bool) string {
	if direct {
		return "O_DIRECT"
	}
	return "buffered"
}

// printPackSummary prints what was done, the throughput, where the time
// went, and the comparison with the disk's own speed.
func printPackSummary(w io.Writer, res *trunk.Result, disk *trunk.DiskSpeed) {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	if res.Resumed {
		fmt.Fprintf(w, "resumed: %d runs kept (re-verified in %s), %d rewritten after a CRC failure\n",
			res.RunsKept, sec(res.CheckTime), res.RunsRewritten)
	}
	// Throughput: trunk bytes written per second of packing (gather,
	// write, verify) plus the final fsync.
	tp, took := 0.0, res.PackTime+res.SyncTime
	if s := took.Seconds(); s > 0 {
		tp = float64(res.BytesWritten) / s
	}
	fmt.Fprintf(w, "packed %d runs, %s in %s: %s\n", res.RunsWritten, units.Bytes(res.BytesWritten), sec(took), units.PerSec(tp))
	fmt.Fprintf(w, "  checkpoint reads %s (%s, %s), trunk.bin writes %s (%s), verification re-reads %s, fsync %s; total %s\n",
		sec(res.ReadTime), units.Bytes(res.BytesRead), ioMode(res.DirectRead), sec(res.WriteTime), ioMode(res.DirectWrite),
		sec(res.VerifyTime), sec(res.SyncTime), sec(res.Elapsed))
	if disk == nil {
		return
	}
	fmt.Fprintf(w, "disk's own sequential speed (measured after packing): read %s (%s of %s, %s), write %s (%s + fsync, %s)\n",
		units.PerSec(disk.ReadBPS()), units.Bytes(disk.ReadBytes), filepath.Base(disk.ReadFile), ioMode(disk.ReadDirect),
		units.PerSec(disk.WriteBPS()), units.Bytes(disk.WriteBytes), ioMode(disk.WriteDirect))
	if b := disk.PackBound(); b > 0 && tp > 0 {
		fmt.Fprintf(w, "  a pack reads, writes and re-reads every byte: at these speeds, one after the other, that is %s; the pack ran at %.0f%% of it\n",
			units.PerSec(b), 100*tp/b)
	}
}

// printCompression prints what compression saved, in all and per kind
// of tensor.
func printCompression(w io.Writer, m *trunk.Manifest) {
	un := m.UncompressedBytes()
	kinds := m.ByKind()
	if len(kinds) == 0 {
		fmt.Fprintf(w, "compressed: no tensor can be stored compressed (only bf16 weight matrices can): trunk.bin is %s, as without --compress\n", units.Bytes(m.TotalBytes))
		return
	}
	fmt.Fprintf(w, "compressed: trunk.bin is %s, %s uncompressed: %.3fx smaller (lossless: the same output)\n",
		units.Bytes(m.TotalBytes), units.Bytes(un), float64(un)/float64(m.TotalBytes))
	var logical, stored int64
	for _, k := range kinds {
		logical += k.Logical
		stored += k.Stored
	}
	fmt.Fprintf(w, "  the %d kinds of compressed matrices: %s -> %s, %.3fx\n", len(kinds), units.Bytes(logical), units.Bytes(stored), float64(logical)/float64(stored))
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-50s %4d x  %10s -> %10s  %.3fx\n", k.Kind, k.Compressed, units.Bytes(k.Logical), units.Bytes(k.Stored), k.Ratio())
	}
}

// packRenderer draws the progress line: on a terminal one line redrawn
// at most 4 times a second, otherwise a line every 5 seconds.
type packRenderer struct {
	w     io.Writer
	tty   bool
	every time.Duration
	start time.Time
	mu    sync.Mutex
	last  time.Time
	width int
}

func (r *packRenderer) update(p trunk.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Phase == trunk.PhaseDone || time.Since(r.last) < r.every {
		return
	}
	r.last = time.Now()
	verb := "packing"
	switch p.Phase {
	case trunk.PhaseCheck:
		verb = "re-verifying the interrupted pack"
	case trunk.PhaseSource:
		verb = "comparing the modified checkpoint with the packed trunk"
	}
	run := p.Run
	if run == "" {
		run = "-"
	}
	line := fmt.Sprintf("%s: %s of %s (%.1f%%), %s, ETA %s, runs %d/%d, %s",
		verb, units.Bytes(p.BytesDone), units.Bytes(p.BytesTotal), 100*float64(p.BytesDone)/max(float64(p.BytesTotal), 1),
		units.PerSec(p.BytesPerSec), etaStr(p.ETA), p.RunsDone, p.RunsTotal, run)
	if !r.tty {
		fmt.Fprintln(r.w, line)
		return
	}
	pad := ""
	if n := r.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	r.width = len(line)
	fmt.Fprintf(r.w, "\r%s%s", line, pad)
}

// finish ends a redrawn line.
func (r *packRenderer) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tty && r.width > 0 {
		fmt.Fprintln(r.w)
		r.width = 0
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
