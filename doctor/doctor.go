// Package doctor answers "can this machine run Kimi K3, how fast, with
// which preset, and what do I do next": CPU and SIMD features, memory with
// cgroup limits, free space and engine-style disk speed per directory
// (O_DIRECT into huge pages, 17.55 MB random reads at queue depth 1 and 8,
// 64 MiB sequential), a quick kernel measurement, and a preset with
// predicted seconds per token and peak RSS from the cost model in cost.go.
//
// The library never prints: Run takes a context (cancellation) and a
// progress callback, so the desktop app can drive it; ui/cli renders the
// Report.
package doctor

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k3/engine/plan"
	"k3/machine"
	"k3/storage/safetensors"
	"k3/storage/units"
	"k3/storage/verify"
)

// Options for Run.
type Options struct {
	Dirs  []string // directories to check (model, trunk); none: the current directory
	Quick bool     // under 15 s: 1 GiB probe, short phases
	// Root is the filesystem /proc and /sys are read from (nil: the real
	// one). Tests pass an fstest.MapFS.
	Root fs.FS
	// Memory reports total and available memory (nil: machine).
	Memory MemorySource
	// SkipDisk and SkipCompute leave those measurements out (their fields
	// say "not measured"); for tests and for a GUI's instant first pass.
	SkipDisk, SkipCompute bool
	// NoDevice stops the disk measurement from reading a directory's block
	// device directly (which it does when permitted, i.e. as root, because
	// a freshly written probe file can be served from a virtual disk's host
	// cache); a probe file is written instead.
	NoDevice bool
	// Progress receives coarse progress; may be nil. Called from the
	// goroutine running Run and from measurement goroutines.
	Progress func(Progress)
}

// Progress is one progress report.
type Progress struct {
	Step     string  // "system", "compute", "disk"
	Dir      string  // for disk steps
	Phase    string  // disk: "write", "qd1", "qd8", "seq"
	Fraction float64 // 0..1 of the whole run, approximate
	Message  string
}

// Report is everything the doctor found.
type Report struct {
	OS         string       `json:"os"`
	Arch       string       `json:"arch"`
	CPU        CPUInfo      `json:"cpu"`
	Memory     MemoryInfo   `json:"memory"`
	Disks      []DiskResult `json:"disks"`
	Compute    Compute      `json:"compute"`
	Preset     Prediction   `json:"preset"`
	AllPresets []Prediction `json:"all_presets"`
	// Drafter is the released DSpark drafter at every preset: whether it
	// fits beside the plan and the projected s/token with it (draftcost.go).
	Drafter []DraftPrediction `json:"drafter"`
	// Picture is what a 1024x1024 picture costs at every preset: its
	// prompt positions, the tower (resident or streamed), the plan with
	// it and the seconds (picturecost.go).
	Picture  []PictureCost `json:"picture"`
	CanRun   bool          `json:"can_run"`
	Problems []string      `json:"problems"` // why it cannot run (empty when CanRun)
	// NoSpaceOnly: the only problem is that no directory given has room for
	// the checkpoint; every check that can run here passed (k3 doctor
	// warns and exits 0, as the C engine's doctor did)
	NoSpaceOnly bool     `json:"no_space_only"`
	Warnings    []string `json:"warnings"`
	Notes       []string `json:"notes"`
	NextCommand string   `json:"next_command"`
	Then        []string `json:"then"` // the commands after that, in order
	ModelDir    string   `json:"model_dir,omitempty"`
	TrunkDir    string   `json:"trunk_dir,omitempty"`
	Quick       bool     `json:"quick"`
	Seconds     float64  `json:"seconds"`
}

// ModelDirName is appended to a directory that does not hold a model yet
// to name the download destination.
const ModelDirName = "Kimi-K3"

// Run measures the machine. It returns an error only if ctx is cancelled.
func Run(ctx context.Context, opt Options) (*Report, error) {
	start := time.Now()
	prog := func(p Progress) {
		if opt.Progress != nil {
			opt.Progress(p)
		}
	}
	r := &Report{OS: runtime.GOOS, Arch: runtime.GOARCH, Quick: opt.Quick, Problems: []string{}, Warnings: []string{}, Notes: []string{}, Then: []string{}}

	prog(Progress{Step: "system", Message: "reading CPU and memory"})
	readSystem(ctx, opt, r)
	measureKernels(ctx, opt, r, prog)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := measureDisks(ctx, opt, r, prog); err != nil {
		return nil, err
	}
	decide(r)
	r.Seconds = round2(time.Since(start).Seconds())
	prog(Progress{Step: "done", Fraction: 1})
	return r, nil
}

// readSystem fills in the CPU and the memory (from opt.Root and
// opt.Memory when given, else from this machine).
func readSystem(ctx context.Context, opt Options, r *Report) {
	root := opt.Root
	if root == nil {
		root = os.DirFS("/")
	}
	src := opt.Memory
	if src == nil {
		src = machineMemory{}
	}
	if opt.Root != nil {
		r.CPU = cpuInfo(machine.ReadCPUFS(opt.Root))
	} else {
		r.CPU = cpuInfo(machine.ReadCPU())
	}
	var notes []string
	r.Memory, notes = readMemory(ctx, src, root)
	r.Notes = append(r.Notes, notes...)
	if !hasFeature(r.CPU.Features, "avx2") && (runtime.GOARCH == "amd64") {
		r.Warnings = append(r.Warnings, "no AVX2: the kernels run on their portable path, several times slower")
	}
}

// measureKernels times the exact kernels, one thread per physical core, or
// assumes the default speeds when told to skip or when timing fails.
func measureKernels(ctx context.Context, opt Options, r *Report, prog func(Progress)) {
	threads := max(1, r.CPU.PhysicalCores)
	if opt.SkipCompute {
		r.Compute = defaultCompute(threads)
		r.Notes = append(r.Notes, fmt.Sprintf("kernel speed not measured: assumed %.0f GB/s bf16 and %.0f GB/s MXFP4 per core", DefaultBF16GBps, DefaultMXFP4GBps))
		return
	}
	prog(Progress{Step: "compute", Fraction: 0.02, Message: "timing the exact bf16 and MXFP4 kernels"})
	d := time.Second
	if opt.Quick {
		d = 300 * time.Millisecond
	}
	var err error
	if r.Compute, err = measureCompute(ctx, threads, d); err != nil && ctx.Err() == nil {
		r.Compute = defaultCompute(threads)
		r.Notes = append(r.Notes, fmt.Sprintf("kernel speed not measured (%v): assumed %.0f GB/s bf16 and %.0f GB/s MXFP4 per core", err, DefaultBF16GBps, DefaultMXFP4GBps))
	}
}

// measureDisks measures each directory's disk, once per device: later
// directories on the same device reuse the first one's speeds.
func measureDisks(ctx context.Context, opt Options, r *Report, prog func(Progress)) error {
	dirs := opt.Dirs
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	pl := diskPlanFor(opt, len(devicesOf(dirs)))
	measured := map[string]DiskResult{}
	for i, d := range dirs {
		dev := deviceOf(d)
		if prev, ok := measured[dev]; ok && dev != "" {
			r.Disks = append(r.Disks, sameDiskAs(ctx, d, prev, opt.SkipDisk))
			continue
		}
		var res DiskResult
		if opt.SkipDisk {
			res = statOnly(d, DiskResult{})
			res.Notes = append(res.Notes, "disk speed not measured (skipped)")
		} else {
			base := 0.1 + 0.9*float64(i)/float64(len(dirs))
			span := 0.9 / float64(len(dirs))
			res = measureDisk(ctx, d, pl, func(phase string, f float64) {
				w := map[string]float64{"write": 0, "qd1": 0.25, "qd8": 0.5, "seq": 0.75}[phase]
				prog(Progress{Step: "disk", Dir: d, Phase: phase, Fraction: base + span*(w+0.25*f)})
			})
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if dev != "" {
			measured[dev] = res
		}
		r.Disks = append(r.Disks, res)
	}
	sameDevice(r.Disks)
	return nil
}

// diskPlanFor sizes the disk measurement: full or quick, its time shared
// among n devices.
func diskPlanFor(opt Options, n int) diskPlan {
	pl := diskPlan{probe: 8 << 30, phase: 12 * time.Second, writeMax: 15 * time.Second, device: !opt.NoDevice}
	if opt.Quick {
		pl = diskPlan{probe: 1 << 30, phase: 1500 * time.Millisecond, writeMax: 2 * time.Second, device: !opt.NoDevice}
	}
	if n > 1 {
		pl.phase = max(pl.phase/time.Duration(n), 500*time.Millisecond)
		pl.writeMax = max(pl.writeMax/time.Duration(n), time.Second)
	}
	return pl
}

// sameDiskAs is dir's own free space and model files with the speeds of
// prev, measured on the same device.
func sameDiskAs(ctx context.Context, dir string, prev DiskResult, skip bool) DiskResult {
	res := measureDisk(ctx, dir, diskPlan{}, func(string, float64) {}) // free space etc. only
	if skip {
		res = DiskResult{}
	}
	res = statOnly(dir, res)
	res.ReadGBpsQD1, res.ReadGBpsQD8, res.SeqGBps, res.WriteGBps = prev.ReadGBpsQD1, prev.ReadGBpsQD8, prev.SeqGBps, prev.WriteGBps
	res.Direct, res.HugePages, res.CacheControl = prev.Direct, prev.HugePages, prev.CacheControl
	return res
}

// statOnly fills the free-space and model fields without measuring.
func statOnly(dir string, r DiskResult) DiskResult {
	if r.Path == "" {
		r.Path = dir
		if abs, err := filepath.Abs(dir); err == nil {
			r.Path = abs
		}
	}
	statDisk(&r, dir)
	_, r.ModelBytes, r.ModelComplete = modelShards(dir)
	r.Trunk = trunkIn(dir)
	if r.Notes == nil {
		r.Notes = []string{}
	}
	return r
}

func hasFeature(fs []string, f string) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// trunkReserve is the space the packed trunk takes next to the checkpoint.
const trunkReserve = 110e9

// decide picks the model and trunk directories, the preset, can_run and
// the next commands.
func decide(r *Report) {
	mi := modelDisk(r.Disks)
	md := r.Disks[mi]
	need := verify.ReleasedBytes - md.ModelBytes
	storageOK := md.ModelComplete || int64(md.FreeBytes) >= need
	modelDir := md.Path
	if !md.ModelComplete && md.ModelBytes == 0 && !LooksLikeModelDir(md.Path) {
		modelDir = filepath.Join(md.Path, ModelDirName)
	}
	r.ModelDir = modelDir
	ti := trunkDisk(r.Disks, mi, need)
	r.TrunkDir = filepath.Join(r.Disks[ti].Path, "k3trunk")

	sp := speedsOf(r, mi, ti)
	pred, memOK := predictAll(r, sp)

	if !memOK {
		r.Problems = append(r.Problems, fmt.Sprintf("only %s of memory is available; even the ultra preset needs ~%s (its memory plan) within 95%% of it",
			units.Bytes(int64(r.Memory.AvailableBytes)), units.Bytes(PeakRSS(plan.Presets[0]))))
	}
	if !storageOK {
		largest := uint64(0)
		for _, d := range r.Disks {
			largest = max(largest, d.FreeBytes)
		}
		r.Problems = append(r.Problems, fmt.Sprintf("no directory given has room for the checkpoint: it needs %s more and the most free space is %s (%s); pass --dir on a disk with at least %s free",
			units.Bytes(need), units.Bytes(int64(largest)), md.Path, units.Bytes(need+trunkReserve)))
	} else if !md.ModelComplete && int64(md.FreeBytes) < need+trunkReserve && ti == mi {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s has room for the checkpoint but not for the packed trunk (~110 GB more): put the trunk on another disk", md.Path))
	}
	r.CanRun = len(r.Problems) == 0
	r.NoSpaceOnly = !storageOK && len(r.Problems) == 1

	// Split storage: say where the time goes.
	if ti != mi && r.Disks[ti].Device != r.Disks[mi].Device {
		r.Notes = append(r.Notes, fmt.Sprintf("trunk on %s (%.2f GB/s sequential), experts from %s (%.2f GB/s random): each device's time is in the prediction",
			r.Disks[ti].Path, sp.TrunkDiskGBps, r.Disks[mi].Path, sp.ExpertDiskGBps))
	}
	r.Notes = append(r.Notes, trunkNote(r.Disks))
	if r.Memory.CgroupLimitBytes == nil && r.Memory.CgroupVersion == 0 {
		r.Notes = append(r.Notes, "no memory cgroup visible")
	}
	nextCommands(r, md.ModelComplete, storageOK, memOK, pred.Name)
}

// modelDisk picks the model directory: one already holding the whole
// model, else the one with the most bytes of it, else the one with the
// most free space.
func modelDisk(disks []DiskResult) int {
	for i, d := range disks {
		if d.ModelComplete {
			return i
		}
	}
	mi := -1
	for i, d := range disks {
		if d.ModelBytes > 0 && (mi < 0 || d.ModelBytes > disks[mi].ModelBytes) {
			mi = i
		}
	}
	if mi >= 0 {
		return mi
	}
	for i, d := range disks {
		if mi < 0 || d.FreeBytes > disks[mi].FreeBytes {
			mi = i
		}
	}
	return mi
}

// trunkDisk picks the trunk directory: the fastest sequential reader with
// room for it (the model's own disk mi, which still needs need bytes, if
// nothing else fits).
func trunkDisk(disks []DiskResult, mi int, need int64) int {
	ti := mi
	for i, d := range disks {
		room := int64(d.FreeBytes)
		if i == mi && !disks[mi].ModelComplete {
			room -= need
		}
		if room < trunkReserve {
			continue
		}
		if disks[ti].SeqGBps == nil || d.SeqGBps != nil && *d.SeqGBps > *disks[ti].SeqGBps {
			ti = i
		}
	}
	return ti
}

// speedsOf is the speeds the predictions use: the kernels', the trunk
// disk's and the model disk's, falling back to the fastest disk measured
// (or 1 GB/s, with a note) where one is missing.
func speedsOf(r *Report, mi, ti int) Speeds {
	sp := Speeds{BF16GBps: r.Compute.BF16GBps, MXFP4GBps: r.Compute.MXFP4GBps, FMAGFlops: r.Compute.FMAGFlops}
	sp.TrunkDiskGBps = bestSpeed(r.Disks[ti].SeqGBps, r.Disks[ti].ReadGBpsQD1, r.Disks[ti].ReadGBpsQD8)
	sp.ExpertDiskGBps = bestSpeed(r.Disks[mi].ReadGBpsQD8, r.Disks[mi].ReadGBpsQD1)
	if sp.TrunkDiskGBps == 0 || sp.ExpertDiskGBps == 0 {
		fb := 0.0
		for _, d := range r.Disks {
			fb = max(fb, bestSpeed(d.SeqGBps, d.ReadGBpsQD8, d.ReadGBpsQD1))
		}
		if fb == 0 {
			fb = 1.0
			r.Notes = append(r.Notes, "no disk speed measured: predictions assume 1 GB/s")
		}
		if sp.TrunkDiskGBps == 0 {
			sp.TrunkDiskGBps = fb
		}
		if sp.ExpertDiskGBps == 0 {
			sp.ExpertDiskGBps = fb
		}
	}
	return sp
}

// predictAll predicts every preset (with its drafter and first-token time)
// and chooses one; memOK is false when even the smallest does not fit.
func predictAll(r *Report, sp Speeds) (pred Prediction, memOK bool) {
	for _, p := range plan.Presets {
		pr := Predict(p, sp)
		if u := r.Memory.Plan().Usable(); u > 0 {
			if f := PredictPrefill(p, sp, 100, u, 0, 0); f.Chunk > 0 {
				pr.FirstToken100, pr.PrefillChunk = round2(f.Seconds), f.Chunk
			}
		}
		r.AllPresets = append(r.AllPresets, pr)
		r.Drafter = append(r.Drafter, PredictDraft(p, sp, r.Memory.Plan()))
		r.Picture = append(r.Picture, PredictPicture(p, sp, r.Memory.Plan()))
	}
	pred, memOK = Choose(r.Memory.Plan(), sp)
	for _, a := range r.AllPresets {
		if a.Name == pred.Name {
			pred.FirstToken100, pred.PrefillChunk = a.FirstToken100, a.PrefillChunk
		}
	}
	r.Preset = pred
	return pred, memOK
}

// nextCommands writes the commands to run next: download (when there is
// room), verify, pack and run, each path shell-quoted.
func nextCommands(r *Report, complete, storageOK, memOK bool, preset string) {
	q := func(s string) string {
		if strings.ContainsAny(s, " \t'\"$`\\") {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
		return s
	}
	run := fmt.Sprintf("k3 run %s --trunk %s --preset %s", q(r.ModelDir), q(r.TrunkDir), preset)
	switch {
	case !r.CanRun && !memOK:
		r.NextCommand = ""
	case !complete && storageOK:
		r.NextCommand = "k3 download " + q(r.ModelDir)
		r.Then = append(r.Then, "k3 verify "+q(r.ModelDir)+" --sha256", "k3 pack "+q(r.ModelDir)+" "+q(r.TrunkDir), run)
	case !complete:
		r.NextCommand = "k3 doctor --dir DIR_WITH_1.7_TB_FREE"
	default:
		r.NextCommand = "k3 verify " + q(r.ModelDir) + " --sha256"
		r.Then = append(r.Then, "k3 pack "+q(r.ModelDir)+" "+q(r.TrunkDir), run)
	}
}

// trunkNote says what trunk sizes the predictions use: those of an
// uncompressed pack, from the config (a compressed pack's size is known
// only once it is packed), and the ratio a compressed trunk found in one
// of the directories measured.
func trunkNote(disks []DiskResult) string {
	for _, d := range disks {
		if t := d.Trunk; t != nil && t.Compression != "" {
			return fmt.Sprintf("the packed trunk in %s is compressed (%s, lossless): %s, %.3fx smaller than its %s uncompressed; the predictions use the uncompressed sizes, so its streamed bytes per token are up to %.3fx fewer than they say",
				d.Path, t.Compression, units.Bytes(t.Bytes), t.Ratio(), units.Bytes(t.UncompressedBytes), t.Ratio())
		}
	}
	return "trunk sizes in the predictions are those of an uncompressed pack; k3 pack --compress stores it losslessly smaller (by a ratio measured when packing), so fewer bytes are read per token"
}

// LooksLikeModelDir is true for a directory that already has model files
// or a download in progress.
func LooksLikeModelDir(dir string) bool {
	for _, n := range []string{verify.ManifestFile, "config.json", safetensors.IndexFile} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors*"))
	return len(m) > 0
}

func bestSpeed(xs ...*float64) float64 {
	b := 0.0
	for _, x := range xs {
		if x != nil && *x > b {
			b = *x
		}
	}
	return b
}
