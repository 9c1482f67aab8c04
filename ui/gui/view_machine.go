package gui

import (
	"context"
	"fmt"
	"os"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"k3/doctor"
	"k3/storage/units"
)

// MachineStep is wizard step 1: what this machine has and how fast it can
// run K3, measured in the background.
type MachineStep struct {
	w      *Wizard
	view   fyne.CanvasObject
	Report *doctor.Report
	Err    error

	Progress  *widget.ProgressBar
	Status    *widget.Label
	Result    *widget.RichText
	MeasureBt *widget.Button
	CancelBt  *widget.Button
	cancel    context.CancelFunc
	running   bool
}

func newMachineStep(w *Wizard) *MachineStep {
	s := &MachineStep{w: w}
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

func (s *MachineStep) Title() string           { return "This machine" }
func (s *MachineStep) View() fyne.CanvasObject { return s.view }
func (s *MachineStep) Ready() (bool, string) {
	if s.running {
		return true, "Measuring in the background; you can go on."
	}
	return true, ""
}

func (s *MachineStep) Enter() {
	if s.Report == nil && !s.running {
		s.Start(true)
	}
}

// dirsToMeasure are the folders whose disks matter: the model's, the
// trunk's, and the home folder when neither is chosen yet.
func (s *MachineStep) dirsToMeasure() []string {
	var dirs []string
	seen := map[string]bool{}
	for _, d := range []string{s.w.u.S.ModelDir, s.w.u.S.TrunkDir} {
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
func (s *MachineStep) Start(quick bool) {
	if s.running || s.w.u.B.Machine == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.running = cancel, true
	s.MeasureBt.Disable()
	s.CancelBt.Enable()
	s.Progress.SetValue(0)
	s.Status.SetText("Measuring…")
	dirs := s.dirsToMeasure()
	m := s.w.u.B.Machine
	do := s.w.u.do
	go func() {
		lim := newLimiter(GaugeHz)
		rep, err := m.Measure(ctx, dirs, quick, func(frac float64, msg string) {
			if lim.ok() {
				do(func() {
					s.Progress.SetValue(frac)
					if msg != "" {
						s.Status.SetText(msg)
					}
				})
			}
		})
		do(func() { s.finish(rep, err) })
	}()
	s.w.Changed()
}

func (s *MachineStep) finish(rep *doctor.Report, err error) {
	s.running = false
	s.cancel = nil
	s.MeasureBt.Enable()
	s.CancelBt.Disable()
	s.Err = err
	if err != nil {
		s.Status.SetText(Explain(err))
	} else {
		s.Report = rep
		s.Progress.SetValue(1)
		s.Status.SetText(fmt.Sprintf("Measured in %.0f s.", rep.Seconds))
		s.Result.ParseMarkdown(describeReport(rep))
	}
	if s.w.u.Wizard == s.w {
		s.w.Changed()
	}
}

// Cancel stops a measurement in flight.
func (s *MachineStep) Cancel() {
	if s.cancel != nil {
		s.cancel()
	}
}

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
	if r.CanRun {
		fmt.Fprintf(&b, "**Recommended:** the *%s* preset (trunk %.0f GB, expert cache %.0f GB): about **%.1f s per token**, peak memory about %s.\n\n",
			p.Name, p.TrunkGB, p.CacheGB, p.PredictedSecondsPerToken, units.Bytes(max(p.PredictedPeakRSSBytes, 0)))
	} else {
		b.WriteString("**This machine cannot run the full model as it is.** The demo model still works.\n\n")
	}
	for _, x := range r.Problems {
		fmt.Fprintf(&b, "- Problem: %s\n", x)
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(&b, "- Note: %s\n", x)
	}
	return b.String()
}
