package gui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/doctor"
	"k3/storage/units"
	"k3/ui/bridge"
)

// machineStep is wizard step 1: what this machine has and how fast it can
// run K3, measured in the background.
type machineStep struct {
	w      *wizard
	view   fyne.CanvasObject
	Report *doctor.Report
	Err    error

	Progress  *widget.ProgressBar
	Status    *widget.Label
	Result    *widget.RichText
	MeasureBt *widget.Button
	CancelBt  *widget.Button
	job       *bridge.Job
}

func newMachineStep(w *wizard) *machineStep {
	s := &machineStep{w: w}
	s.Progress = widget.NewProgressBar()
	s.Status = wrapLabel("Not measured yet.")
	s.Result = widget.NewRichTextFromMarkdown("")
	s.Result.Wrapping = fyne.TextWrapWord
	s.MeasureBt = widget.NewButton("Measure thoroughly (about a minute)", func() { s.Start(false) })
	s.CancelBt = widget.NewButton("Cancel", s.Cancel)
	s.CancelBt.Disable()
	intro := wrapLabel("k3 reads memory, processor and each disk the way the engine uses them " +
		"(17.5 MB random reads, like loading one expert) and then suggests how to run the model. " +
		"A quick measurement starts by itself; you can go on while it runs.")
	s.view = scroll(container.NewVBox(intro, container.NewHBox(s.MeasureBt, s.CancelBt), s.Progress, s.Status, s.Result))
	return s
}

func (s *machineStep) Title() string           { return "This machine" }
func (s *machineStep) View() fyne.CanvasObject { return s.view }
func (s *machineStep) Ready() (bool, string) {
	if s.job != nil {
		return true, "Measuring in the background; you can go on."
	}
	return true, ""
}

func (s *machineStep) Enter() {
	if s.Report != nil || s.job != nil {
		return
	}
	// memory and processor stay; a disk measured before needs no new
	// measurement (a model on another disk does)
	if rep, at, ok := s.w.u.machines.Lookup(s.dirsToMeasure()); ok {
		s.show(rep)
		s.Status.SetText(fmt.Sprintf("Measured %s (in %.0f s). Measure thoroughly measures again.", bridge.MeasuredAgo(at, time.Now()), rep.Seconds))
		return
	}
	s.Start(true)
}

// dirsToMeasure are the folders whose disks matter: the model's, the
// trunk's, and the home folder when neither is chosen yet.
func (s *machineStep) dirsToMeasure() []string {
	var dirs []string
	seen := map[string]bool{}
	for _, d := range []string{s.w.D.ModelDir, s.w.D.TrunkDir} {
		if d != "" && !seen[d] {
			if _, err := os.Stat(d); err == nil {
				dirs = append(dirs, d)
				seen[d] = true
			}
		}
	}
	if len(dirs) == 0 {
		if h, err := os.UserHomeDir(); err == nil {
			dirs = append(dirs, h)
		}
	}
	return dirs
}

// Start measures in the background.
func (s *machineStep) Start(quick bool) {
	if s.job != nil || s.w.u.B.Machine == nil {
		return
	}
	s.MeasureBt.Disable()
	s.CancelBt.Enable()
	s.Progress.SetValue(0)
	s.Status.SetText("Measuring…")
	dirs := s.dirsToMeasure()
	m := s.w.u.B.Machine
	type step struct {
		frac float64
		msg  string
	}
	var rep *doctor.Report
	s.job = bridge.StartJob(s.w.u.do, bridge.GaugeHz, func(ctx context.Context, progress func(step)) error {
		var err error
		rep, err = m.Measure(ctx, dirs, quick, func(frac float64, msg string) { progress(step{frac, msg}) })
		return err
	}, func(p step) {
		s.Progress.SetValue(p.frac)
		if p.msg != "" {
			s.Status.SetText(progressWords(p.msg))
		}
	}, func(err error) {
		if err == nil && rep != nil {
			s.w.u.machine = rep
			logDetails("keeping the measurement", s.w.u.machines.Keep(rep, dirs, time.Now()))
		}
		s.finish(rep, err)
	})
	s.w.Changed()
}

func (s *machineStep) finish(rep *doctor.Report, err error) {
	s.job = nil
	s.MeasureBt.Enable()
	s.CancelBt.Disable()
	s.Err = err
	switch {
	case errors.Is(err, context.Canceled):
		s.Status.SetText("Stopped. A measurement cannot go on from the middle: Measure starts it again.")
	case err != nil:
		s.Status.SetText(bridge.Explain(err))
	default:
		s.show(rep)
		s.Status.SetText(fmt.Sprintf("Measured in %.0f s.", rep.Seconds))
	}
	if s.w.u.wizard == s.w {
		s.w.Changed()
	}
}

// Cancel stops a measurement in flight.
// show shows a measurement.
func (s *machineStep) show(rep *doctor.Report) {
	s.Report = rep
	s.Progress.SetValue(1)
	s.Result.ParseMarkdown(describeReport(rep))
}

func (s *machineStep) Cancel() { s.job.Cancel() }

func rate(p *float64) string {
	if p == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.2f GB/s", *p)
}

// describeReport puts the doctor's findings in plain words (Markdown).
func describeReport(r *doctor.Report) string {
	var b strings.Builder
	m := r.Memory
	fmt.Fprintf(&b, "**Memory:** %s in all, %s free for k3 now", units.Bytes(int64(m.TotalBytes)), units.Bytes(int64(m.AvailableBytes)))
	if m.CgroupLimitBytes != nil {
		fmt.Fprintf(&b, " (a container limit of %s applies)", units.Bytes(int64(*m.CgroupLimitBytes)))
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(&b, "**Processor:** %s, %d cores (%d threads)", strings.TrimSpace(r.CPU.Model), r.CPU.PhysicalCores, r.CPU.LogicalCores)
	if len(r.CPU.Features) > 0 {
		fmt.Fprintf(&b, "; uses %s", strings.Join(r.CPU.Features, ", "))
	}
	b.WriteString(".\n\n")
	for _, d := range r.Disks {
		fmt.Fprintf(&b, "**Disk of %s**", d.Path)
		if d.Device != "" {
			fmt.Fprintf(&b, " (%s", d.Device)
			if d.Filesystem != "" {
				fmt.Fprintf(&b, ", %s", d.Filesystem)
			}
			b.WriteString(")")
		}
		fmt.Fprintf(&b, ": %s free of %s. ", units.Bytes(int64(d.FreeBytes)), units.Bytes(int64(d.TotalBytes)))
		if d.SameDeviceAs != "" {
			fmt.Fprintf(&b, "Same disk as %s.\n\n", d.SameDeviceAs)
			continue
		}
		fmt.Fprintf(&b, "Reads expert-sized blocks at %s (8 at a time) and %s (one at a time); streams at %s.\n\n",
			rate(d.ReadGBpsQD8), rate(d.ReadGBpsQD1), rate(d.SeqGBps))
	}
	p := r.Preset
	switch {
	case r.CanRun:
		fmt.Fprintf(&b, "**Recommended:** the *%s* preset (%.0f GB for the layers every word needs, %.0f GB for the experts): about **%.1f s per token**, peak memory about %s.\n\n",
			p.Name, p.TrunkGB, p.CacheGB, p.PredictedSecondsPerToken, units.Bytes(max(p.PredictedPeakRSSBytes, 0)))
	case p.PredictedSecondsPerToken > 0:
		b.WriteString("**This machine cannot run the full model as it is** (see below). The demo model still works.\n\n")
		fmt.Fprintf(&b, "**Once that is solved:** the *%s* preset (%.0f GB for the layers every word needs, %.0f GB for the experts) would give about **%.1f s per token**, peak memory about %s.\n\n",
			p.Name, p.TrunkGB, p.CacheGB, p.PredictedSecondsPerToken, units.Bytes(max(p.PredictedPeakRSSBytes, 0)))
	default:
		b.WriteString("**This machine cannot run the full model as it is.** The demo model still works.\n\n")
	}
	for _, x := range r.Problems {
		fmt.Fprintf(&b, "- Problem: %s\n", fullStop(appWords(x)))
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(&b, "- Note: %s\n", fullStop(appWords(x)))
	}
	return b.String()
}

// appWords puts the doctor's command-line advice in the app's terms.
var appWords = strings.NewReplacer(
	"no AVX2: the kernels run on their portable path, several times slower",
	"this processor lacks AVX2, so k3 computes several times slower on it",
	"not for the packed trunk (~110 GB more): put the trunk on another disk",
	"not for the trunk, the copy of the layers every word needs that step 3 packs (~110 GB more): choose another disk for it there",
	"no directory given has room", "no disk measured has room",
	"; pass --dir on a disk with at least", ". Choose a model folder (step 2) on a disk with at least",
	"pass --dir", "choose a folder (step 2)",
	"--trunk-gb/--cache-gb", "the memory sliders (step 4)",
	"--preset", "preset",
).Replace

// progressWords puts the measurement's steps in plain words (G26: "timing
// the exact bf16 and MXFP4 kernels" on the first screen).
var progressWords = strings.NewReplacer(
	"timing the exact bf16 and MXFP4 kernels", "measuring how fast this processor computes",
	"reading CPU and memory", "reading the processor and the memory",
).Replace

// fullStop ends a sentence with a full stop (G26).
func fullStop(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}
