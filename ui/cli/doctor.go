package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k3/doctor"
	"k3/storage/units"
	"k3/ui/bridge"
)

func init() {
	register("doctor", "check this machine: CPU, memory, disks; recommend a preset", runDoctor)
}

// storeDirs is a repeatable --dir flag.
type storeDirs []string

func (d *storeDirs) String() string     { return strings.Join(*d, ",") }
func (d *storeDirs) Set(s string) error { *d = append(*d, s); return nil }

// doctorOptions lets tests inject fake memory and /proc, and skip timing.
var doctorOptions = func(o doctor.Options) doctor.Options { return o }

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("doctor", stderr)
	var dirs storeDirs
	fs.Var(&dirs, "dir", "directory to check (model, trunk; repeatable; default: current directory)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	quick := fs.Bool("quick", false, "measure for under 15 s instead of about a minute")
	noDevice := fs.Bool("no-device", false, "never read a block device directly, even as root")
	setUsage(fs, stderr,
		"usage: k3 doctor [--dir PATH]... [--json] [--quick]",
		"Measures CPU, memory (cgroup limits included), and each directory's free space and",
		"disk speed the way the engine reads; recommends a preset and prints the next command.",
		"Exit 1 only when this machine cannot run the model at all; too little free space for the",
		"checkpoint alone is a warning (exit 0).",
	)
	pos, code := parseArgs(fs, args)
	if code >= 0 {
		return code
	}
	dirs = append(dirs, pos...) // "k3 doctor DIR" works too
	ctx, stop := storeInterrupt()
	defer stop()
	opt := doctorOptions(doctor.Options{Dirs: dirs, Quick: *quick, NoDevice: *noDevice})
	if !*asJSON {
		last := ""
		opt.Progress = func(p doctor.Progress) {
			key := p.Step + p.Dir + p.Phase
			if key == last || p.Step == "done" {
				return
			}
			last = key
			switch p.Step {
			case "disk":
				fmt.Fprintf(stderr, "  measuring %s: %s\n", p.Dir, map[string]string{"write": "writing a probe file (O_DIRECT)", "qd1": "random 17.55 MB reads, queue depth 1", "qd8": "random 17.55 MB reads, queue depth 8", "seq": "sequential 64 MiB reads"}[p.Phase])
			default:
				if p.Message != "" {
					fmt.Fprintf(stderr, "  %s\n", p.Message)
				}
			}
		}
	}
	rep, err := doctor.Run(ctx, opt)
	if err != nil {
		fmt.Fprintln(stderr, "k3 doctor: interrupted")
		return ExitInterrupted
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return ExitOutput
		}
	} else {
		printDoctor(stdout, rep)
	}
	switch {
	case rep.NoSpaceOnly:
		// warned in the report; every other check passed
	case !rep.CanRun:
		return ExitRuntime
	}
	return ExitOK
}

func gbps(x *float64) string {
	if x == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.2f GB/s", *x)
}

func printDoctor(w io.Writer, r *doctor.Report) {
	fmt.Fprintf(w, "system   %s/%s, %s, %d physical / %d logical cores\n", r.OS, r.Arch, r.CPU.Model, r.CPU.PhysicalCores, r.CPU.LogicalCores)
	fmt.Fprintf(w, "simd     %s\n", strings.Join(r.CPU.Features, " "))
	cg := "no cgroup limit"
	if r.Memory.CgroupLimitBytes != nil {
		cg = fmt.Sprintf("cgroup v%d limit %s", r.Memory.CgroupVersion, units.Bytes(int64(*r.Memory.CgroupLimitBytes)))
	}
	fmt.Fprintf(w, "memory   %s total, %s available (%s)\n", units.Bytes(int64(r.Memory.TotalBytes)), units.Bytes(int64(r.Memory.AvailableBytes)), cg)
	kind := "measured"
	if !r.Compute.Measured {
		kind = "assumed"
	} else if r.Compute.RAMGBps > 0 {
		kind += fmt.Sprintf("; RAM read %.1f GB/s", r.Compute.RAMGBps)
	}
	fmt.Fprintf(w, "kernels  exact bf16 %.1f GB/s, MXFP4 %.1f GB/s on %d threads (%s)\n", r.Compute.BF16GBps, r.Compute.MXFP4GBps, r.Compute.Threads, kind)
	for _, d := range r.Disks {
		printDoctorDisk(w, d)
	}
	fmt.Fprintln(w, "\npresets on this machine (predicted):")
	for _, p := range r.AllPresets {
		mark := "  "
		if p.Name == r.Preset.Name && r.CanRun {
			mark = "->"
		}
		fmt.Fprintf(w, " %s %-12s %6.1f s/token  peak RSS %6.1f GB  reads %5.1f GB/token (io %.1f s + compute %.1f s)%s\n",
			mark, p.Name, p.PredictedSecondsPerToken, float64(p.PredictedPeakRSSBytes)/1e9, float64(p.DiskBytesPerToken)/1e9, p.IOSeconds, p.ComputeSeconds, firstToken100(p))
	}
	printDoctorDrafter(w, r.Drafter)
	printDoctorPicture(w, r.Picture)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, n := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", n)
	}
	fmt.Fprintln(w)
	printDoctorVerdict(w, r)
}

// printDoctorDisk shows one disk: space, read rates, what was read to
// measure them, the model files and packed trunk on it, and its notes.
func printDoctorDisk(w io.Writer, d doctor.DiskResult) {
	fmt.Fprintf(w, "disk     %s: %s free of %s", d.Path, units.Bytes(int64(d.FreeBytes)), units.Bytes(int64(d.TotalBytes)))
	if d.Filesystem != "" {
		fmt.Fprintf(w, " (%s)", d.Filesystem)
	}
	fmt.Fprintln(w)
	if d.SameDeviceAs != "" {
		fmt.Fprintf(w, "           same device as %s\n", d.SameDeviceAs)
	}
	fmt.Fprintf(w, "           random 17.55 MB reads: %s at queue depth 1, %s at 8; sequential 64 MiB: %s\n", gbps(d.ReadGBpsQD1), gbps(d.ReadGBpsQD8), gbps(d.SeqGBps))
	if d.ProbeSource != "" {
		fmt.Fprintf(w, "           read %s (%s), %s\n", d.ProbeSource, units.Bytes(d.ProbeBytes), d.CacheControl)
	}
	if d.ModelBytes > 0 {
		state := "partial"
		if d.ModelComplete {
			state = "complete"
		}
		fmt.Fprintf(w, "           model files: %s present (%s)\n", units.Bytes(d.ModelBytes), state)
	}
	if t := d.Trunk; t != nil {
		if t.Compression != "" {
			fmt.Fprintf(w, "           packed trunk: %d layers, compressed (%s, lossless): %s, %s uncompressed, %.3fx smaller\n",
				t.Layers, t.Compression, units.Bytes(t.Bytes), units.Bytes(t.UncompressedBytes), t.Ratio())
		} else {
			fmt.Fprintf(w, "           packed trunk: %d layers, uncompressed, %s\n", t.Layers, units.Bytes(t.Bytes))
		}
	}
	for _, n := range d.Notes {
		fmt.Fprintf(w, "           note: %s\n", n)
	}
}

// printDoctorVerdict says whether the machine can run the model, with
// which preset, and what to run next.
func printDoctorVerdict(w io.Writer, r *doctor.Report) {
	if r.CanRun {
		fmt.Fprintf(w, "this machine can run Kimi K3 with preset %s: ~%.1f s/token, peak RSS ~%s\n",
			r.Preset.Name, r.Preset.PredictedSecondsPerToken, units.Bytes(r.Preset.PredictedPeakRSSBytes))
	} else if r.NoSpaceOnly {
		fmt.Fprintf(w, "this machine can run Kimi K3 with preset %s (~%.1f s/token, peak RSS ~%s) once it has the disk space:\n",
			r.Preset.Name, r.Preset.PredictedSecondsPerToken, units.Bytes(r.Preset.PredictedPeakRSSBytes))
		fmt.Fprintf(w, "  - warning: %s\n", r.Problems[0])
	} else {
		fmt.Fprintln(w, "this machine cannot run Kimi K3 as it is:")
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  - %s\n", p)
		}
	}
	if r.NextCommand != "" {
		fmt.Fprintf(w, "next: %s\n", r.NextCommand)
		for _, t := range r.Then {
			fmt.Fprintf(w, "then: %s\n", t)
		}
	}
}

// printDoctorDrafter shows, per preset, whether the released DSpark drafter
// fits beside the plan (resident, or streamed) and the projected s/token
// without and with it; streamed, its reads and the bytes per token.
func printDoctorDrafter(w io.Writer, ds []doctor.DraftPrediction) {
	if len(ds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwith the released DSpark drafter (k3 download DEST --draft; projected from its published %.2f tokens per pass at %d drafts on code):\n",
		doctor.PublishedTokensPerPass, doctor.PublishedDrafts)
	for _, d := range ds {
		fit := "fits"
		switch {
		case !d.Fits:
			fit = "does not fit"
		case d.Streamed:
			fit = "fits streamed"
		}
		with := "drafting does not pay"
		if d.DraftLength > 0 {
			drafts := "drafts"
			if d.DraftLength == 1 {
				drafts = "draft"
			}
			with = fmt.Sprintf("%.1f s/token with it (%d %s, %.2f tokens per pass, %.2fx)", d.SecondsPerToken, d.DraftLength, drafts, d.TokensPerPass, d.PlainSecondsPerToken/d.SecondsPerToken)
		}
		fmt.Fprintf(w, "    %-12s %-13s (peak RSS %5.1f GB)  %6.1f s/token without, %s\n", d.Name, fit, float64(d.PeakRSSBytes)/1e9, d.PlainSecondsPerToken, with)
		if d.Streamed && d.Fits {
			fmt.Fprintf(w, "    %-12s streamed, it reads %.2f GB per drafting cycle: %.1f GB read per token with it, %.1f without\n", "", float64(d.DraftReadBytes)/1e9, d.BytesPerToken/1e9, d.PlainBytesPerToken/1e9)
		}
	}
}

// firstToken100 is a preset's predicted time to the first token of a
// 100-position prompt, read in passes of the plan's chunk ("" when the
// preset does not fit this machine's memory).
func firstToken100(p doctor.Prediction) string {
	if p.PrefillChunk <= 0 {
		return ""
	}
	return fmt.Sprintf("; first token of a 100-position prompt after %.0f s (prompt chunk %d)", p.FirstToken100, p.PrefillChunk)
}

// printDoctorPicture shows, per preset, what a picture costs: its prompt
// positions, the vision tower resident or streamed, the plan with it and
// the time (looking at it, then reading its positions).
func printDoctorPicture(w io.Writer, ps []doctor.PictureCost) {
	if len(ps) == 0 {
		return
	}
	p0 := ps[0]
	fmt.Fprintf(w, "\na %dx%d picture is %d prompt positions; the vision tower looks at it first (%.1f TFLOP at %.0f%% of this machine's FMA peak):\n",
		p0.Width, p0.Height, p0.Positions, doctor.K3Vision.CostOf(doctor.PictureGrid()).Flops/1e12, 100*doctor.TowerPeakFraction)
	for _, p := range ps {
		tower := fmt.Sprintf("tower resident (%.2f GB)", float64(p.TowerBytes)/1e9)
		if p.TowerStreamed {
			tower = fmt.Sprintf("tower streamed (%.2f GB held while it looks)", float64(p.TowerBytes)/1e9)
		}
		fit := "fits"
		if !p.Fits {
			fit = "does not fit"
		}
		reading := "reading it not predicted (the preset does not fit)"
		if p.PromptSeconds > 0 {
			reading = fmt.Sprintf("reading it %s", bridge.Duration(time.Duration(p.PromptSeconds*float64(time.Second))))
		}
		fmt.Fprintf(w, "    at %-12s %-12s (peak RSS %5.1f GB)  %s; looking %s, %s\n", p.Name, fit, float64(p.PeakRSSBytes)/1e9, tower, bridge.Duration(time.Duration(p.TowerSeconds*float64(time.Second))), reading)
	}
}
