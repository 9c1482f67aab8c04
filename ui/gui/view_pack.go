package gui

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"k3/doctor"
	"k3/ui/bridge"
)

// PackStep is wizard step 3: write the packed trunk (every layer's dense
// weights in one file, read in order every token) onto the fastest disk.
type PackStep struct {
	w    *Wizard
	view fyne.CanvasObject

	Info    *widget.Label
	Dir     *widget.Entry
	PackBt  *widget.Button
	Bar     *widget.ProgressBar
	Status  *widget.Label
	need    int64
	job     *bridge.Job
	Packing bool
}

// TrunkFolderName is appended to a suggested disk.
const TrunkFolderName = "k3-trunk"

func newPackStep(w *Wizard) *PackStep {
	s := &PackStep{w: w}
	s.Info = wrapLabel("")
	s.Dir = widget.NewEntry()
	s.Dir.SetPlaceHolder("folder for the packed trunk (put it on the fastest disk)")
	choose := widget.NewButton("Choose folder…", func() {
		dialog.ShowFolderOpen(func(l fyne.ListableURI, err error) {
			if err == nil && l != nil {
				s.Dir.SetText(filepath.Join(l.Path(), TrunkFolderName))
			}
		}, w.u.Win)
	})
	s.PackBt = widget.NewButton("Pack the trunk", s.Toggle)
	s.Bar = widget.NewProgressBar()
	s.Status = wrapLabel("")
	intro := wrapLabel("The trunk (every layer's dense weights) is read from disk for every token unless it fits in memory. " +
		"Packing writes it once as one file in reading order, so streaming it is as fast as the disk allows. " +
		"You can stop and continue later; finished layers are kept.")
	s.view = scroll(container.NewVBox(intro, s.Info,
		container.NewBorder(nil, nil, widget.NewLabel("Trunk folder"), choose, s.Dir),
		s.PackBt, s.Bar, s.Status))
	return s
}

func (s *PackStep) Title() string           { return "Pack the trunk" }
func (s *PackStep) View() fyne.CanvasObject { return s.view }

// SuggestTrunkDir picks the measured disk with the fastest sequential reads
// that has room for need bytes (plus 5%). It returns "" when none has.
func SuggestTrunkDir(r *doctor.Report, need int64) (dir, why string) {
	if r == nil {
		return "", ""
	}
	best := -1.0
	for _, d := range r.Disks {
		if float64(d.FreeBytes) < float64(need)*1.05 {
			continue
		}
		speed := 0.0
		if d.SeqGBps != nil {
			speed = *d.SeqGBps
		}
		if speed > best {
			best = speed
			dir = filepath.Join(d.Path, TrunkFolderName)
			why = fmt.Sprintf("suggested: the disk of %s streams at %s and has %s free", d.Path, rate(d.SeqGBps), gb(d.FreeBytes))
		}
	}
	return dir, why
}

func (s *PackStep) Enter() {
	u := s.w.u
	if u.B.Packer == nil {
		return
	}
	need, err := u.B.Packer.TrunkBytes(u.S.ModelDir, u.S.Layers)
	if err != nil {
		s.Info.SetText(bridge.Explain(err))
		return
	}
	s.need = need
	info := fmt.Sprintf("The trunk of this checkpoint takes %s.", gb(uint64(need)))
	if s.Dir.Text == "" {
		switch {
		case u.S.TrunkDir != "":
			s.Dir.SetText(u.S.TrunkDir)
		default:
			if dir, why := SuggestTrunkDir(s.w.Machine.Report, need); dir != "" {
				s.Dir.SetText(dir)
				info += " " + strings.ToUpper(why[:1]) + why[1:] + "."
			} else if u.S.ModelDir != "" {
				s.Dir.SetText(filepath.Join(filepath.Dir(u.S.ModelDir), TrunkFolderName))
			}
		}
	}
	s.Info.SetText(info)
	if u.S.TrunkDir != "" && s.Status.Text == "" {
		s.Status.SetText("The trunk is packed in " + u.S.TrunkDir + ".")
	}
}

func (s *PackStep) Ready() (bool, string) {
	if s.Packing {
		return false, "Packing is running. Cancel it or wait until it finishes."
	}
	if s.w.u.S.TrunkDir == "" {
		return true, "Not packed: every layer will be held in memory (fine for the demo and partial checkpoints)."
	}
	return true, ""
}

// Toggle starts or cancels packing.
func (s *PackStep) Toggle() {
	u := s.w.u
	if s.Packing {
		s.job.Cancel()
		return
	}
	dir := strings.TrimSpace(s.Dir.Text)
	if dir == "" {
		s.Status.SetText("Choose the folder for the packed trunk first.")
		return
	}
	s.Packing = true
	s.PackBt.SetText("Cancel packing")
	s.Status.SetText("Packing…")
	s.w.Changed()
	model, layers := u.S.ModelDir, u.S.Layers
	start := time.Now()
	pk := u.B.Packer
	s.job = bridge.StartJob(u.do, bridge.GaugeHz, func(ctx context.Context, progress func(bridge.PackProgress)) error {
		return pk.Pack(ctx, model, dir, layers, progress)
	}, func(p bridge.PackProgress) { s.showProgress(p, time.Since(start)) }, func(err error) { s.done(dir, err) })
}

func (s *PackStep) showProgress(p bridge.PackProgress, elapsed time.Duration) {
	if p.Total > 0 {
		s.Bar.SetValue(float64(p.Done) / float64(p.Total))
	}
	mbps := float64(p.Done) / 1e6 / max(elapsed.Seconds(), 1e-3)
	eta := "estimating time left"
	if p.Done > 0 && p.Total > p.Done {
		left := time.Duration(float64(elapsed) * float64(p.Total-p.Done) / float64(p.Done))
		eta = "about " + left.Round(time.Second).String() + " left"
	}
	s.Status.SetText(fmt.Sprintf("Layer %d of %d, %.2f of %.2f GB, %.0f MB/s, %s", p.Layer, p.Layers,
		float64(p.Done)/1e9, float64(p.Total)/1e9, mbps, eta))
}

func (s *PackStep) done(dir string, err error) {
	u := s.w.u
	s.Packing, s.job = false, nil
	s.PackBt.SetText("Pack the trunk")
	switch {
	case err == nil:
		s.Bar.SetValue(1)
		u.S.TrunkDir = dir
		u.SaveSettings()
		s.Status.SetText("Packed into " + dir + ".")
	case errors.Is(err, context.Canceled):
		s.PackBt.SetText("Continue packing")
		s.Status.SetText("Stopped. The finished layers are kept; Continue picks up where it stopped.")
	default:
		s.Status.SetText(bridge.Explain(err))
	}
	if u.Wizard == s.w {
		s.w.Changed()
	}
}

func (s *PackStep) Cancel() { s.job.Cancel() }
